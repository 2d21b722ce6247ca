/* gguf.c — the GGUF reader (attn_gguf_open*, metadata lookups and typed getters, tensor infos and
 * data) and writer (attn_gguf_save, attn_gguf_writer_*). The format is specified in
 * include/attn_gguf.h.
 *
 * Invariants: the parser reads only through an attn_reader (a mapping of the file, the caller's
 * buffer or any reader), through a buffered cursor that never reads past the end, and checks
 * every length and count against the bytes left before allocating for it: a string costs its
 * length plus a NUL, an array of n elements needs at least n times its smallest element's size
 * in the file, so the parsed metadata (one arena) stays within a small multiple of the file's
 * size whatever the file says. Everything is validated before an attn_gguf is handed out (keys
 * and names unique, types known, shapes and sizes without overflow, offsets aligned, inside the
 * file and not overlapping), so lookups and tensor reads need no further checks. */
#include "io-impl.h"
#include "attn_gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define CURSOR_WINDOW ((size_t)1 << 16)
#define WRITE_BUFFER ((size_t)1 << 20)

/* ---- types ---- */

typedef struct {
    const char *name;
    uint32_t block, size;
} dtype_info;

static const dtype_info dtypes[ATTN_GGUF_DTYPE_COUNT] = {
    [ATTN_GGUF_DTYPE_F32] = {"F32", 1, 4},         [ATTN_GGUF_DTYPE_F16] = {"F16", 1, 2},
    [ATTN_GGUF_DTYPE_Q4_0] = {"Q4_0", 32, 18},     [ATTN_GGUF_DTYPE_Q4_1] = {"Q4_1", 32, 20},
    [ATTN_GGUF_DTYPE_Q5_0] = {"Q5_0", 32, 22},     [ATTN_GGUF_DTYPE_Q5_1] = {"Q5_1", 32, 24},
    [ATTN_GGUF_DTYPE_Q8_0] = {"Q8_0", 32, 34},     [ATTN_GGUF_DTYPE_Q8_1] = {"Q8_1", 32, 36},
    [ATTN_GGUF_DTYPE_Q2_K] = {"Q2_K", 256, 84},    [ATTN_GGUF_DTYPE_Q3_K] = {"Q3_K", 256, 110},
    [ATTN_GGUF_DTYPE_Q4_K] = {"Q4_K", 256, 144},   [ATTN_GGUF_DTYPE_Q5_K] = {"Q5_K", 256, 176},
    [ATTN_GGUF_DTYPE_Q6_K] = {"Q6_K", 256, 210},   [ATTN_GGUF_DTYPE_Q8_K] = {"Q8_K", 256, 292},
    [ATTN_GGUF_DTYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [ATTN_GGUF_DTYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [ATTN_GGUF_DTYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [ATTN_GGUF_DTYPE_IQ1_S] = {"IQ1_S", 256, 50},  [ATTN_GGUF_DTYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [ATTN_GGUF_DTYPE_IQ3_S] = {"IQ3_S", 256, 110}, [ATTN_GGUF_DTYPE_IQ2_S] = {"IQ2_S", 256, 82},
    [ATTN_GGUF_DTYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [ATTN_GGUF_DTYPE_I8] = {"I8", 1, 1},           [ATTN_GGUF_DTYPE_I16] = {"I16", 1, 2},
    [ATTN_GGUF_DTYPE_I32] = {"I32", 1, 4},         [ATTN_GGUF_DTYPE_I64] = {"I64", 1, 8},
    [ATTN_GGUF_DTYPE_F64] = {"F64", 1, 8},         [ATTN_GGUF_DTYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [ATTN_GGUF_DTYPE_BF16] = {"BF16", 1, 2},       [ATTN_GGUF_DTYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [ATTN_GGUF_DTYPE_TQ2_0] = {"TQ2_0", 256, 66},  [ATTN_GGUF_DTYPE_MXFP4] = {"MXFP4", 32, 17},
    [ATTN_GGUF_DTYPE_NVFP4] = {"NVFP4", 64, 36},   [ATTN_GGUF_DTYPE_Q1_0] = {"Q1_0", 128, 18},
    [ATTN_GGUF_DTYPE_Q2_0] = {"Q2_0", 64, 18},
};

const char *attn_gguf_dtype_name(attn_gguf_dtype t) {
    return (unsigned)t < ATTN_GGUF_DTYPE_COUNT ? dtypes[t].name : NULL;
}

bool attn_gguf_dtype_block(attn_gguf_dtype t, uint32_t *block_size, uint32_t *type_size) {
    bool ok = (unsigned)t < ATTN_GGUF_DTYPE_COUNT && dtypes[t].name;
    if (block_size) *block_size = ok ? dtypes[t].block : 0;
    if (type_size) *type_size = ok ? dtypes[t].size : 0;
    return ok;
}

static const char *const type_names[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                         "bool", "string", "array", "u64", "i64", "f64"};
#define N_TYPES 13

const char *attn_gguf_type_name(attn_gguf_type t) {
    return (unsigned)t < N_TYPES ? type_names[t] : "?";
}

/* Bytes of a fixed-size value type; 0 for STRING, ARRAY and unknown numbers. */
static size_t fixed_size(uint32_t t) {
    static const unsigned char sz[N_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < N_TYPES ? sz[t] : 0;
}

/* The fewest bytes one value of type t takes in a file (a string: its length; an array: its
 * element type and count). */
static uint64_t min_size(uint32_t t) {
    return t == ATTN_GGUF_TYPE_STRING ? 8 : t == ATTN_GGUF_TYPE_ARRAY ? 12 : fixed_size(t);
}

/* Bytes in memory of one element of an array of type t. */
static size_t elem_mem(uint32_t t) {
    return t == ATTN_GGUF_TYPE_STRING  ? sizeof(attn_gguf_str)
           : t == ATTN_GGUF_TYPE_ARRAY ? sizeof(attn_gguf_value)
           : t == ATTN_GGUF_TYPE_BOOL  ? sizeof(bool)
                                       : fixed_size(t);
}

bool attn_gguf_nbytes(attn_gguf_dtype t, int n_dims, const int64_t *ne, uint64_t *nbytes) {
    uint32_t bs, ts;
    if (!attn_gguf_dtype_block(t, &bs, &ts) || n_dims < 0 || n_dims > ATTN_GGUF_MAX_DIMS ||
        (n_dims > 0 && !ne))
        return false;
    uint64_t n = 1;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) return false;
        if (ne[i] && n > (uint64_t)INT64_MAX / (uint64_t)ne[i]) return false;
        n *= (uint64_t)ne[i];
    }
    if (n_dims > 0 && ne[0] % bs) return false;
    if (n_dims == 0 && bs != 1) return false;
    uint64_t blocks = n / bs;
    if (blocks && ts > UINT64_MAX / blocks) return false;
    if (nbytes) *nbytes = blocks * ts;
    return true;
}

/* ---- writer shorthands ---- */

attn_gguf_kv attn_gguf_kv_u32(const char *key, uint32_t v) {
    attn_gguf_kv kv = {key, {ATTN_GGUF_TYPE_UINT32, {.u32 = v}}};
    return kv;
}
attn_gguf_kv attn_gguf_kv_i32(const char *key, int32_t v) {
    attn_gguf_kv kv = {key, {ATTN_GGUF_TYPE_INT32, {.i32 = v}}};
    return kv;
}
attn_gguf_kv attn_gguf_kv_u64(const char *key, uint64_t v) {
    attn_gguf_kv kv = {key, {ATTN_GGUF_TYPE_UINT64, {.u64 = v}}};
    return kv;
}
attn_gguf_kv attn_gguf_kv_f32(const char *key, float v) {
    attn_gguf_kv kv = {key, {ATTN_GGUF_TYPE_FLOAT32, {.f32 = v}}};
    return kv;
}
attn_gguf_kv attn_gguf_kv_bool(const char *key, bool v) {
    attn_gguf_kv kv = {key, {ATTN_GGUF_TYPE_BOOL, {.b = v}}};
    return kv;
}
attn_gguf_kv attn_gguf_kv_str(const char *key, const char *s) {
    attn_gguf_kv kv = {key, {ATTN_GGUF_TYPE_STRING, {.str = {s, s ? strlen(s) : 0}}}};
    return kv;
}
attn_gguf_kv attn_gguf_kv_arr(const char *key, attn_gguf_type type, uint64_t n, const void *data) {
    attn_gguf_kv kv = {key, {ATTN_GGUF_TYPE_ARRAY, {.arr = {type, n, data}}}};
    return kv;
}

/* ---- the parsed file ---- */

/* Chunks of memory freed together: every string and array of the metadata. */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
} arena_chunk;

struct attn_gguf {
    attn_reader r;
    const char *name;
    void *map;  /* the mapping (attn_gguf_open) or NULL */
    size_t map_len;
    const unsigned char *mem; /* tensor data base: the mapping or the caller's buffer, or NULL */
    uint32_t version, alignment;
    uint64_t data_offset;
    size_t n_kv, n_tensors;
    attn_gguf_kv *kv;
    attn_gguf_tensor *t;
    size_t *kv_sorted, *t_sorted; /* indices, by key / name */
    arena_chunk *arena;
};

/* n bytes, 16-byte aligned when aligned (arrays), else anywhere (string bytes). */
static void *arena_alloc_a(attn_gguf *g, size_t n, bool aligned) {
    arena_chunk *c = g->arena;
    if (c && aligned) c->used = (c->used + 15) & ~(size_t)15;
    if (c && c->used > c->cap) c->used = c->cap;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ((size_t)1 << 20) ? n : ((size_t)1 << 20);
        if (cap > SIZE_MAX - sizeof *c) return NULL;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = g->arena;
        g->arena = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

static void *arena_alloc(attn_gguf *g, size_t n) { return arena_alloc_a(g, n, true); }

void attn_gguf_close(attn_gguf *g) {
    if (!g) return;
    attn_reader_close(&g->r);
    if (g->map) munmap(g->map, g->map_len);
    for (arena_chunk *c = g->arena, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(g->kv);
    free(g->t);
    free(g->kv_sorted);
    free(g->t_sorted);
    free(g);
}

/* ---- the cursor: buffered sequential reads through the reader ---- */

typedef struct {
    attn_gguf *g;
    uint64_t pos, size;
    unsigned char *win; /* CURSOR_WINDOW bytes of the file from woff, wlen of them valid */
    uint64_t woff;
    size_t wlen;
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

/* Read n bytes (the caller checked that n <= left(c)). */
static attn_status cur_read(cursor *c, void *dst, size_t n) {
    unsigned char *d = dst;
    while (n) {
        if (c->pos >= c->woff && c->pos < c->woff + c->wlen) {
            size_t at = (size_t)(c->pos - c->woff), k = ATTN_MIN(n, c->wlen - at);
            memcpy(d, c->win + at, k);
            d += k, n -= k, c->pos += k;
            continue;
        }
        if (n >= CURSOR_WINDOW) { /* large: straight into dst */
            ATTN_TRY(c->g->r.read(c->g->r.ctx, c->pos, d, n));
            c->pos += n;
            return ATTN_STATUS_OK;
        }
        size_t w = (size_t)ATTN_MIN((uint64_t)CURSOR_WINDOW, left(c));
        ATTN_TRY(c->g->r.read(c->g->r.ctx, c->pos, c->win, w));
        c->woff = c->pos;
        c->wlen = w;
    }
    return ATTN_STATUS_OK;
}

/* A message's view of a key or name. */
#define SHOWN(buf, s, n) attn_io_shown(buf, sizeof buf, s, (size_t)(n))

/* What is being read, for a truncation message: "key 'K'", "key 3", "tensor 'T'". */
typedef struct {
    const char *kind; /* "key" or "tensor" */
    const char *name; /* NULL: by index */
    uint64_t len;
    uint64_t index;
} where;

static const char *where_str(char *buf, size_t cap, const where *w) {
    if (w->name) {
        char nm[120];
        snprintf(buf, cap, "%s '%s'", w->kind, attn_io_shown(nm, sizeof nm, w->name, w->len));
    } else {
        snprintf(buf, cap, "%s %llu", w->kind, (unsigned long long)w->index);
    }
    return buf;
}

/* FORMAT unless n bytes are left: "FILE: truncated: WHERE: WHAT needs N bytes at offset P, M
 * left". */
static attn_status need(cursor *c, uint64_t n, const where *w, const char *what) {
    if (n <= left(c)) return ATTN_STATUS_OK;
    char ws[200];
    return attn_fail(ATTN_STATUS_FORMAT,
                     "%s: truncated: %s: %s needs %llu bytes at offset %llu, the file has %llu "
                     "left",
                     c->g->name, where_str(ws, sizeof ws, w), what, (unsigned long long)n,
                     (unsigned long long)c->pos, (unsigned long long)left(c));
}

static attn_status read_u32(cursor *c, const where *w, const char *what, uint32_t *v) {
    unsigned char b[4];
    ATTN_TRY(need(c, 4, w, what));
    ATTN_TRY(cur_read(c, b, 4));
    *v = attn_ld32(b);
    return ATTN_STATUS_OK;
}

static attn_status read_u64(cursor *c, const where *w, const char *what, uint64_t *v) {
    unsigned char b[8];
    ATTN_TRY(need(c, 8, w, what));
    ATTN_TRY(cur_read(c, b, 8));
    *v = attn_ld64(b);
    return ATTN_STATUS_OK;
}

/* A string (u64 length + bytes) into the arena, NUL-terminated. */
static attn_status read_str(cursor *c, const where *w, const char *what, attn_gguf_str *s) {
    uint64_t n;
    ATTN_TRY(read_u64(c, w, what, &n));
    if (n > left(c)) {
        char ws[200];
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: %s: %s has length %llu, more than the %llu bytes left in the file",
                         c->g->name, where_str(ws, sizeof ws, w), what, (unsigned long long)n,
                         (unsigned long long)left(c));
    }
    char *p = arena_alloc_a(c->g, (size_t)n + 1, false);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", c->g->name);
    ATTN_TRY(cur_read(c, p, (size_t)n));
    p[n] = '\0';
    s->s = p;
    s->len = n;
    return ATTN_STATUS_OK;
}

/* ---- metadata values ---- */

static attn_status bad_type(cursor *c, const where *w, const char *what, uint32_t t) {
    char ws[200];
    return attn_fail(ATTN_STATUS_FORMAT,
                     "%s: %s: %s %u is not a GGUF value type (0..12: u8, i8, u16, i16, u32, i32, "
                     "f32, bool, string, array, u64, i64, f64)",
                     c->g->name, where_str(ws, sizeof ws, w), what, t);
}

/* Convert n little-endian values of fixed type t at p (in place) to host values; BOOL bytes
 * must be 0 or 1. Returns the index of a bad BOOL byte, or n. */
static uint64_t from_le(uint32_t t, void *p, uint64_t n) {
    unsigned char *b = p;
    switch (fixed_size(t)) {
    case 2:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t v = attn_ld16(b + 2 * i);
            memcpy(b + 2 * i, &v, 2);
        }
        break;
    case 4:
        for (uint64_t i = 0; i < n; i++) {
            uint32_t v = attn_ld32(b + 4 * i);
            memcpy(b + 4 * i, &v, 4);
        }
        break;
    case 8:
        for (uint64_t i = 0; i < n; i++) {
            uint64_t v = attn_ld64(b + 8 * i);
            memcpy(b + 8 * i, &v, 8);
        }
        break;
    default:
        if (t == ATTN_GGUF_TYPE_BOOL) {
            for (uint64_t i = 0; i < n; i++) {
                if (b[i] > 1) return i;
                bool v = b[i] != 0;
                memcpy(b + i, &v, sizeof v); /* sizeof(bool) == 1 (checked below) */
            }
        }
        break;
    }
    return n;
}

_Static_assert(sizeof(bool) == 1, "GGUF BOOL arrays are read in place as bool");

static attn_status read_value(cursor *c, const where *w, uint32_t type, int depth,
                              attn_gguf_value *out);

static attn_status read_array(cursor *c, const where *w, int depth, attn_gguf_value *out) {
    char ws[200];
    uint32_t et;
    uint64_t n;
    ATTN_TRY(read_u32(c, w, "the array's element type", &et));
    if (et >= N_TYPES) return bad_type(c, w, "array element type", et);
    if (et == ATTN_GGUF_TYPE_ARRAY && depth + 1 >= ATTN_GGUF_MAX_DEPTH)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: arrays nested more than %d levels deep",
                         c->g->name, where_str(ws, sizeof ws, w), ATTN_GGUF_MAX_DEPTH);
    ATTN_TRY(read_u64(c, w, "the array's length", &n));
    if (n > left(c) / min_size(et))
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: %s: an array of %llu %s values cannot fit in the %llu bytes left in "
                         "the file",
                         c->g->name, where_str(ws, sizeof ws, w), (unsigned long long)n,
                         type_names[et], (unsigned long long)left(c));
    if (n > (SIZE_MAX - 1) / elem_mem(et))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: %s: an array of %llu elements is too large",
                         c->g->name, where_str(ws, sizeof ws, w), (unsigned long long)n);
    out->type = ATTN_GGUF_TYPE_ARRAY;
    out->v.arr.type = (attn_gguf_type)et;
    out->v.arr.n = n;
    void *data = arena_alloc(c->g, (size_t)n * elem_mem(et) + 1);
    if (!data) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", c->g->name);
    out->v.arr.data = data;
    size_t fs = fixed_size(et);
    if (fs) {
        ATTN_TRY(cur_read(c, data, (size_t)n * fs));
        uint64_t bad = from_le(et, data, n);
        if (bad < n)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: bool element %llu is %u, expected 0 or 1",
                             c->g->name, where_str(ws, sizeof ws, w), (unsigned long long)bad,
                             ((unsigned char *)data)[bad]);
        return ATTN_STATUS_OK;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (et == ATTN_GGUF_TYPE_STRING)
            ATTN_TRY(read_str(c, w, "a string element", &((attn_gguf_str *)data)[i]));
        else
            ATTN_TRY(read_value(c, w, et, depth + 1, &((attn_gguf_value *)data)[i]));
    }
    return ATTN_STATUS_OK;
}

static attn_status read_value(cursor *c, const where *w, uint32_t type, int depth,
                              attn_gguf_value *out) {
    memset(out, 0, sizeof *out);
    out->type = (attn_gguf_type)type;
    if (type == ATTN_GGUF_TYPE_STRING) return read_str(c, w, "the string value", &out->v.str);
    if (type == ATTN_GGUF_TYPE_ARRAY) return read_array(c, w, depth, out);
    size_t fs = fixed_size(type);
    unsigned char b[8];
    ATTN_TRY(need(c, fs, w, "the value"));
    ATTN_TRY(cur_read(c, b, fs));
    switch (type) {
    case ATTN_GGUF_TYPE_UINT8: out->v.u8 = b[0]; break;
    case ATTN_GGUF_TYPE_INT8: out->v.i8 = (int8_t)b[0]; break;
    case ATTN_GGUF_TYPE_UINT16: out->v.u16 = attn_ld16(b); break;
    case ATTN_GGUF_TYPE_INT16: out->v.i16 = (int16_t)attn_ld16(b); break;
    case ATTN_GGUF_TYPE_UINT32: out->v.u32 = attn_ld32(b); break;
    case ATTN_GGUF_TYPE_INT32: out->v.i32 = (int32_t)attn_ld32(b); break;
    case ATTN_GGUF_TYPE_UINT64: out->v.u64 = attn_ld64(b); break;
    case ATTN_GGUF_TYPE_INT64: out->v.i64 = (int64_t)attn_ld64(b); break;
    case ATTN_GGUF_TYPE_FLOAT32: out->v.f32 = attn_bits_f32(attn_ld32(b)); break;
    case ATTN_GGUF_TYPE_FLOAT64: {
        uint64_t u = attn_ld64(b);
        memcpy(&out->v.f64, &u, sizeof u);
        break;
    }
    default: /* BOOL */
        if (b[0] > 1) {
            char ws[200];
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: bool value is %u, expected 0 or 1",
                             c->g->name, where_str(ws, sizeof ws, w), b[0]);
        }
        out->v.b = b[0] != 0;
        break;
    }
    return ATTN_STATUS_OK;
}

/* ---- lookups ---- */

/* qsort has no context argument: the file being indexed, per thread. */
static _Thread_local const attn_gguf *sort_ctx;

static int kv_cmp(const void *a, const void *b) {
    return strcmp(sort_ctx->kv[*(const size_t *)a].key, sort_ctx->kv[*(const size_t *)b].key);
}

static int t_cmp(const void *a, const void *b) {
    return strcmp(sort_ctx->t[*(const size_t *)a].name, sort_ctx->t[*(const size_t *)b].name);
}

/* Sorted index of n strings (key(i)), for binary search; a duplicate is FORMAT. */
static attn_status build_index(attn_gguf *g, bool tensors, size_t **out) {
    size_t n = tensors ? g->n_tensors : g->n_kv;
    size_t *ix = malloc((n ? n : 1) * sizeof *ix);
    if (!ix) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    for (size_t i = 0; i < n; i++) ix[i] = i;
    sort_ctx = g;
    qsort(ix, n, sizeof *ix, tensors ? t_cmp : kv_cmp);
    *out = ix;
    for (size_t i = 1; i < n; i++) {
        const char *a = tensors ? g->t[ix[i - 1]].name : g->kv[ix[i - 1]].key;
        const char *b = tensors ? g->t[ix[i]].name : g->kv[ix[i]].key;
        if (!strcmp(a, b)) {
            char nm[120];
            return attn_fail(ATTN_STATUS_FORMAT, "%s: duplicate %s '%s'", g->name,
                             tensors ? "tensor name" : "key", SHOWN(nm, a, strlen(a)));
        }
    }
    return ATTN_STATUS_OK;
}

static size_t lookup(const attn_gguf *g, bool tensors, const char *s) {
    size_t n = tensors ? g->n_tensors : g->n_kv, lo = 0, hi = n;
    const size_t *ix = tensors ? g->t_sorted : g->kv_sorted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s, tensors ? g->t[ix[mid]].name : g->kv[ix[mid]].key);
        if (!c) return ix[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return SIZE_MAX;
}

/* ---- opening ---- */

typedef struct {
    uint64_t b, e;
    size_t i;
} span;

static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    if (a->e != b->e) return a->e < b->e ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static attn_status read_tensor_info(cursor *c, uint64_t i, attn_gguf_tensor *t) {
    attn_gguf *g = c->g;
    where w = {"tensor", NULL, 0, i};
    attn_gguf_str name;
    ATTN_TRY(read_str(c, &w, "the name", &name));
    char nm[120];
    if (memchr(name.s, 0, (size_t)name.len))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor %llu: the name '%s' holds a NUL byte",
                         g->name, (unsigned long long)i, SHOWN(nm, name.s, name.len));
    t->name = name.s;
    w.name = name.s;
    w.len = name.len;
    SHOWN(nm, name.s, name.len);
    uint32_t nd, type;
    ATTN_TRY(read_u32(c, &w, "the number of dimensions", &nd));
    if (nd > ATTN_GGUF_MAX_DIMS)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' has %u dimensions, at most %d",
                         g->name, nm, nd, ATTN_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t n = 1;
    bool overflow = false;
    for (int d = 0; d < ATTN_GGUF_MAX_DIMS; d++) t->ne[d] = t->shape[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        ATTN_TRY(read_u64(c, &w, "a dimension", &v));
        if (v > (uint64_t)INT64_MAX)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s': dimension %u is %llu, above 2^63",
                             g->name, nm, d, (unsigned long long)v);
        t->ne[d] = (int64_t)v;
        if (v && n > (uint64_t)INT64_MAX / v) overflow = true;
        else n *= v;
    }
    for (int d = 0; d < t->n_dims; d++) t->shape[d] = t->ne[t->n_dims - 1 - d];
    ATTN_TRY(read_u32(c, &w, "the type", &type));
    ATTN_TRY(read_u64(c, &w, "the offset", &t->offset));
    t->type = (attn_gguf_dtype)type;
    if (type >= ATTN_GGUF_DTYPE_COUNT)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: tensor '%s' has type %u, which ggml does not know (0..%d)", g->name,
                         nm, type, ATTN_GGUF_DTYPE_COUNT - 1);
    if (!dtypes[type].name)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' has type %u, which ggml removed",
                         g->name, nm, type);
    char sh[128];
    int k = snprintf(sh, sizeof sh, "[");
    for (int d = 0; d < t->n_dims; d++)
        k += snprintf(sh + k, sizeof sh - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    snprintf(sh + k, sizeof sh - (size_t)k, "]");
    if (overflow)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': the element count of ne %s overflows 2^63", g->name,
                         nm, sh);
    if ((t->n_dims ? t->ne[0] : 1) % dtypes[type].block)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': ne %s does not fit type %s (ne[0] must be a multiple "
                         "of its block of %u elements)",
                         g->name, nm, sh, dtypes[type].name, dtypes[type].block);
    if (!attn_gguf_nbytes(t->type, t->n_dims, t->ne, &t->nbytes))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s': the byte size of ne %s of %s "
                         "overflows", g->name, nm, sh, dtypes[type].name);
    t->n_elements = n;
    return ATTN_STATUS_OK;
}

/* Offsets aligned, inside the file, not overlapping; then absolute. */
static attn_status check_tensor_data(attn_gguf *g) {
    uint64_t size = g->r.size, base = g->data_offset;
    for (size_t i = 0; i < g->n_tensors; i++) {
        attn_gguf_tensor *t = &g->t[i];
        char nm[120];
        SHOWN(nm, t->name, strlen(t->name));
        if (t->offset % g->alignment)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tensor '%s': offset %llu is not a multiple of the alignment %u",
                             g->name, nm, (unsigned long long)t->offset, g->alignment);
        if (base > size || t->offset > size - base || t->nbytes > size - base - t->offset)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tensor '%s': its %llu bytes at offset %llu of the data section "
                             "(file offset %llu) are past the end of the file (%llu bytes; "
                             "truncated?)",
                             g->name, nm, (unsigned long long)t->nbytes,
                             (unsigned long long)t->offset, (unsigned long long)(base + t->offset),
                             (unsigned long long)size);
        t->offset += base;
    }
    if (g->n_tensors < 2) return ATTN_STATUS_OK;
    span *sp = malloc(g->n_tensors * sizeof *sp);
    if (!sp) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    for (size_t i = 0; i < g->n_tensors; i++)
        sp[i] = (span){g->t[i].offset, g->t[i].offset + g->t[i].nbytes, i};
    qsort(sp, g->n_tensors, sizeof *sp, span_cmp);
    attn_status s = ATTN_STATUS_OK;
    size_t last = SIZE_MAX; /* the non-empty tensor reaching furthest so far */
    for (size_t k = 0; k < g->n_tensors && !s; k++) {
        if (sp[k].e == sp[k].b) continue;
        if (last != SIZE_MAX && sp[k].b < sp[last].e) {
            const attn_gguf_tensor *a = &g->t[sp[last].i], *b = &g->t[sp[k].i];
            char an[120], bn[120];
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensors '%s' (bytes %llu..%llu) and '%s' (%llu..%llu) overlap",
                          g->name, SHOWN(an, a->name, strlen(a->name)),
                          (unsigned long long)(a->offset - base),
                          (unsigned long long)(a->offset - base + a->nbytes),
                          SHOWN(bn, b->name, strlen(b->name)),
                          (unsigned long long)(b->offset - base),
                          (unsigned long long)(b->offset - base + b->nbytes));
        }
        if (last == SIZE_MAX || sp[k].e > sp[last].e) last = k;
    }
    free(sp);
    return s;
}

static attn_status parse(attn_gguf *g) {
    cursor c = {g, 0, g->r.size, NULL, 0, 0};
    c.win = malloc(CURSOR_WINDOW);
    if (!c.win) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    attn_status s = ATTN_STATUS_OK;
    unsigned char hdr[24];
    if (g->r.size < 4 || (s = cur_read(&c, hdr, 4))) {
        free(c.win);
        return s ? s : attn_fail(ATTN_STATUS_FORMAT, "%s: %llu bytes, too short for a GGUF file",
                                 g->name, (unsigned long long)g->r.size);
    }
    if (memcmp(hdr, GGUF_MAGIC, 4)) {
        char m[40];
        free(c.win);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: not a GGUF file (magic '%s', expected 'GGUF')",
                         g->name, attn_io_shown(m, sizeof m, (const char *)hdr, 4));
    }
    where w = {"header", NULL, 0, 0};
    uint64_t nt = 0, nkv = 0;
    if (!(s = read_u32(&c, &w, "the version", &g->version))) {
        if (g->version == 1)
            s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                          "%s: GGUF version 1 is not supported (only 2 and 3)", g->name);
        else if ((g->version & 0xffff) == 0 && g->version)
            s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                          "%s: GGUF version field 0x%08x: a big-endian file (not supported)",
                          g->name, g->version);
        else if (g->version != 2 && g->version != 3)
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: GGUF version %u (expected 2 or 3)", g->name,
                          g->version);
    }
    if (!s) s = read_u64(&c, &w, "the tensor count", &nt);
    if (!s) s = read_u64(&c, &w, "the metadata count", &nkv);
    /* each tensor info takes at least 24 bytes, each key-value pair 13 */
    if (!s && nkv > left(&c) / 13)
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: %llu metadata entries cannot fit in the %llu bytes left in the file",
                      g->name, (unsigned long long)nkv, (unsigned long long)left(&c));
    if (!s && nt > left(&c) / 24)
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: %llu tensor infos cannot fit in the %llu bytes left in the file",
                      g->name, (unsigned long long)nt, (unsigned long long)left(&c));
    if (!s) {
        g->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
        g->t = calloc(nt ? (size_t)nt : 1, sizeof *g->t);
        if (!g->kv || !g->t) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    }
    for (uint64_t i = 0; !s && i < nkv; i++) {
        where kw = {"key", NULL, 0, i};
        attn_gguf_str key;
        uint32_t type;
        if ((s = read_str(&c, &kw, "the name", &key))) break;
        if (!key.len || memchr(key.s, 0, (size_t)key.len)) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: key %llu: %s", g->name, (unsigned long long)i,
                          key.len ? "the name holds a NUL byte" : "the name is empty");
            break;
        }
        kw.name = key.s;
        kw.len = key.len;
        if ((s = read_u32(&c, &kw, "the value type", &type))) break;
        if (type >= N_TYPES) {
            s = bad_type(&c, &kw, "value type", type);
            break;
        }
        g->kv[i].key = key.s;
        if ((s = read_value(&c, &kw, type, 0, &g->kv[i].val))) break;
        g->n_kv = (size_t)i + 1;
    }
    if (!s) s = build_index(g, false, &g->kv_sorted);
    g->alignment = ATTN_GGUF_DEFAULT_ALIGNMENT;
    const attn_gguf_value *al = s ? NULL : attn_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != ATTN_GGUF_TYPE_UINT32)
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: key 'general.alignment' is %s, expected u32",
                          g->name, attn_gguf_type_name(al->type));
        else if (!al->v.u32 || (al->v.u32 & (al->v.u32 - 1)))
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: key 'general.alignment' is %u, expected a power of two", g->name,
                          al->v.u32);
        else
            g->alignment = al->v.u32;
    }
    for (uint64_t i = 0; !s && i < nt; i++) {
        s = read_tensor_info(&c, i, &g->t[i]);
        if (!s) g->n_tensors = (size_t)i + 1;
    }
    free(c.win);
    if (s) return s;
    ATTN_TRY(build_index(g, true, &g->t_sorted));
    uint64_t a = g->alignment;
    g->data_offset = c.pos + (a - c.pos % a) % a; /* c.pos <= size < 2^64 - 2^32 in practice */
    if (g->data_offset < c.pos) g->data_offset = UINT64_MAX;
    return check_tensor_data(g);
}

attn_status attn_gguf_open_reader(attn_reader r, attn_gguf **out) {
    if (!out) {
        attn_reader_close(&r);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_open_reader: out is NULL");
    }
    *out = NULL;
    if (!r.read) {
        attn_reader_close(&r);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_open_reader: reader has no read");
    }
    attn_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        attn_status s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                  r.name ? r.name : "<reader>");
        attn_reader_close(&r);
        return s;
    }
    g->r = r;
    g->name = r.name ? r.name : "<reader>";
    attn_status s = parse(g);
    if (s) {
        attn_gguf_close(g);
        return s;
    }
    *out = g;
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_open_memory(const void *buf, size_t n, const char *name, attn_gguf **out) {
    if (out) *out = NULL;
    attn_reader r;
    ATTN_TRY(attn_reader_open_memory(buf, n, name, &r));
    ATTN_TRY(attn_gguf_open_reader(r, out));
    (*out)->mem = buf;
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_open(const char *path, attn_gguf **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_open: empty path");
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return attn_fail(ATTN_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        bool dir = S_ISDIR(st.st_mode);
        close(fd);
        return attn_fail(ATTN_STATUS_IO, "%s: %s", path,
                         dir ? "a directory, not a GGUF file" : e ? strerror(e) : "not a regular file");
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: too large to map", path);
    }
    size_t n = (size_t)st.st_size;
    void *map = NULL;
    if (n) {
        map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return attn_fail(ATTN_STATUS_IO, "%s: cannot map %zu bytes: %s", path, n, strerror(e));
        }
    }
    close(fd);
    attn_status s = attn_gguf_open_memory(map ? map : "", n, path, out);
    if (s) {
        if (map) munmap(map, n);
        return s;
    }
    (*out)->map = map;
    (*out)->map_len = n;
    return ATTN_STATUS_OK;
}

const char *attn_gguf_name(const attn_gguf *g) { return g ? g->name : ""; }
uint32_t attn_gguf_version(const attn_gguf *g) { return g ? g->version : 0; }
uint32_t attn_gguf_alignment(const attn_gguf *g) { return g ? g->alignment : 0; }
uint64_t attn_gguf_data_offset(const attn_gguf *g) { return g ? g->data_offset : 0; }

/* ---- metadata lookups ---- */

size_t attn_gguf_kv_count(const attn_gguf *g) { return g ? g->n_kv : 0; }

const attn_gguf_kv *attn_gguf_kv_at(const attn_gguf *g, size_t i) {
    return g && i < g->n_kv ? &g->kv[i] : NULL;
}

const attn_gguf_value *attn_gguf_find(const attn_gguf *g, const char *key) {
    if (!g || !key || !g->kv_sorted) return NULL;
    size_t i = lookup(g, false, key);
    return i == SIZE_MAX ? NULL : &g->kv[i].val;
}

static attn_status wrong_type(const attn_gguf *g, const char *key, const attn_gguf_value *v,
                              const char *expected) {
    char nm[120];
    if (v->type == ATTN_GGUF_TYPE_ARRAY)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: key '%s' is an array of %s, expected %s",
                         g->name, SHOWN(nm, key, strlen(key)), attn_gguf_type_name(v->v.arr.type),
                         expected);
    return attn_fail(ATTN_STATUS_FORMAT, "%s: key '%s' is %s, expected %s", g->name,
                     SHOWN(nm, key, strlen(key)), attn_gguf_type_name(v->type), expected);
}

static attn_status find_any(const attn_gguf *g, const char *key, const attn_gguf_value **out) {
    if (!g || !key || !out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_get: NULL argument");
    *out = attn_gguf_find(g, key);
    if (!*out) {
        char nm[120];
        return attn_fail(ATTN_STATUS_NOT_FOUND, "%s: no key '%s'", g->name,
                         SHOWN(nm, key, strlen(key)));
    }
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_get(const attn_gguf *g, const char *key, attn_gguf_type type,
                          const attn_gguf_value **out) {
    const attn_gguf_value *v;
    ATTN_TRY(find_any(g, key, &v));
    if (v->type != type) return wrong_type(g, key, v, attn_gguf_type_name(type));
    *out = v;
    return ATTN_STATUS_OK;
}

#define GETTER(fn, T, TYPE, field)                                                               \
    attn_status fn(const attn_gguf *g, const char *key, T *out) {                                \
        const attn_gguf_value *v;                                                                \
        ATTN_TRY(attn_gguf_get(g, key, TYPE, &v));                                               \
        if (out) *out = v->v.field;                                                              \
        return ATTN_STATUS_OK;                                                                   \
    }
GETTER(attn_gguf_get_u32, uint32_t, ATTN_GGUF_TYPE_UINT32, u32)
GETTER(attn_gguf_get_i32, int32_t, ATTN_GGUF_TYPE_INT32, i32)
GETTER(attn_gguf_get_u64, uint64_t, ATTN_GGUF_TYPE_UINT64, u64)
GETTER(attn_gguf_get_f32, float, ATTN_GGUF_TYPE_FLOAT32, f32)
GETTER(attn_gguf_get_bool, bool, ATTN_GGUF_TYPE_BOOL, b)

attn_status attn_gguf_get_str(const attn_gguf *g, const char *key, const char **s,
                              uint64_t *len) {
    const attn_gguf_value *v;
    ATTN_TRY(attn_gguf_get(g, key, ATTN_GGUF_TYPE_STRING, &v));
    if (s) *s = v->v.str.s;
    if (len) *len = v->v.str.len;
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_get_int(const attn_gguf *g, const char *key, int64_t *out) {
    const attn_gguf_value *v;
    ATTN_TRY(find_any(g, key, &v));
    int64_t x;
    switch (v->type) {
    case ATTN_GGUF_TYPE_UINT8: x = v->v.u8; break;
    case ATTN_GGUF_TYPE_INT8: x = v->v.i8; break;
    case ATTN_GGUF_TYPE_UINT16: x = v->v.u16; break;
    case ATTN_GGUF_TYPE_INT16: x = v->v.i16; break;
    case ATTN_GGUF_TYPE_UINT32: x = v->v.u32; break;
    case ATTN_GGUF_TYPE_INT32: x = v->v.i32; break;
    case ATTN_GGUF_TYPE_INT64: x = v->v.i64; break;
    case ATTN_GGUF_TYPE_UINT64:
        if (v->v.u64 > (uint64_t)INT64_MAX) {
            char nm[120];
            return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: key '%s' is %llu, too large", g->name,
                             SHOWN(nm, key, strlen(key)), (unsigned long long)v->v.u64);
        }
        x = (int64_t)v->v.u64;
        break;
    default: return wrong_type(g, key, v, "an integer");
    }
    if (out) *out = x;
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_get_float(const attn_gguf *g, const char *key, double *out) {
    const attn_gguf_value *v;
    ATTN_TRY(find_any(g, key, &v));
    if (v->type == ATTN_GGUF_TYPE_FLOAT32) {
        if (out) *out = v->v.f32;
    } else if (v->type == ATTN_GGUF_TYPE_FLOAT64) {
        if (out) *out = v->v.f64;
    } else {
        return wrong_type(g, key, v, "f32 or f64");
    }
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_get_arr(const attn_gguf *g, const char *key, attn_gguf_type elem,
                              const void **data, uint64_t *n) {
    const attn_gguf_value *v;
    ATTN_TRY(find_any(g, key, &v));
    if (v->type != ATTN_GGUF_TYPE_ARRAY || v->v.arr.type != elem) {
        char want[40];
        snprintf(want, sizeof want, "an array of %s", attn_gguf_type_name(elem));
        return wrong_type(g, key, v, want);
    }
    if (data) *data = v->v.arr.data;
    if (n) *n = v->v.arr.n;
    return ATTN_STATUS_OK;
}

/* ---- tensors ---- */

size_t attn_gguf_tensor_count(const attn_gguf *g) { return g ? g->n_tensors : 0; }

const attn_gguf_tensor *attn_gguf_tensor_at(const attn_gguf *g, size_t i) {
    return g && i < g->n_tensors ? &g->t[i] : NULL;
}

const attn_gguf_tensor *attn_gguf_find_tensor(const attn_gguf *g, const char *name) {
    if (!g || !name || !g->t_sorted) return NULL;
    size_t i = lookup(g, true, name);
    return i == SIZE_MAX ? NULL : &g->t[i];
}

const void *attn_gguf_tensor_data(const attn_gguf *g, const attn_gguf_tensor *t) {
    if (!g || !t || !g->mem) return NULL;
    return g->mem + t->offset;
}

void attn_gguf_release_data(const attn_gguf *g, const attn_gguf_tensor *t) {
    if (!g || !t || !g->map || !t->nbytes) return;
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    const uintptr_t a = (uintptr_t)(g->mem + t->offset), e = a + (uintptr_t)t->nbytes;
    const uintptr_t a0 = (a + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    const uintptr_t e0 = e & ~((uintptr_t)page - 1);
    if (e0 > a0) (void)madvise((void *)a0, e0 - a0, MADV_DONTNEED);
}

attn_status attn_gguf_read_tensor(const attn_gguf *g, const attn_gguf_tensor *t, void *dst) {
    if (!g || !t || (!dst && t->nbytes))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_read_tensor: NULL argument");
    if (t->nbytes > SIZE_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: tensor '%s' is too large", g->name, t->name);
    if (!t->nbytes) return ATTN_STATUS_OK;
    return g->r.read(g->r.ctx, t->offset, dst, (size_t)t->nbytes);
}

/* ---- writing ---- */

struct attn_gguf_writer {
    attn_atomic a;
    const char *path;
    unsigned char *buf; /* WRITE_BUFFER bytes, n pending */
    size_t n;
    uint64_t pos; /* bytes written so far, pending ones included */
    uint32_t align;
    size_t n_tensors, cur; /* the tensor whose bytes come next */
    uint64_t *nbytes;      /* (n_tensors) */
    char **names;          /* (n_tensors) copies, for messages */
    uint64_t done;         /* bytes of tensor cur written */
};

static attn_status w_flush(attn_gguf_writer *w) {
    attn_status s = w->n ? attn_atomic_write(&w->a, w->buf, w->n) : ATTN_STATUS_OK;
    w->n = 0;
    return s;
}

static attn_status w_put(attn_gguf_writer *w, const void *p, size_t n) {
    w->pos += n;
    if (n > WRITE_BUFFER - w->n) {
        ATTN_TRY(w_flush(w));
        if (n >= WRITE_BUFFER) return attn_atomic_write(&w->a, p, n);
    }
    if (n) memcpy(w->buf + w->n, p, n);
    w->n += n;
    return ATTN_STATUS_OK;
}

static attn_status w_u32(attn_gguf_writer *w, uint32_t v) {
    unsigned char b[4];
    attn_st32(b, v);
    return w_put(w, b, 4);
}

static attn_status w_u64(attn_gguf_writer *w, uint64_t v) {
    unsigned char b[8];
    attn_st64(b, v);
    return w_put(w, b, 8);
}

static attn_status w_str(attn_gguf_writer *w, const char *s, uint64_t n) {
    ATTN_TRY(w_u64(w, n));
    return w_put(w, s, (size_t)n);
}

static attn_status w_pad(attn_gguf_writer *w) {
    static const unsigned char zeros[64];
    uint64_t pad = (w->align - w->pos % w->align) % w->align;
    while (pad) {
        size_t k = (size_t)ATTN_MIN(pad, (uint64_t)sizeof zeros);
        ATTN_TRY(w_put(w, zeros, k));
        pad -= k;
    }
    return ATTN_STATUS_OK;
}

/* A value's checks (INVALID_ARGUMENT naming the key) before anything is written. */
static attn_status check_value(const char *path, const char *key, const attn_gguf_value *v,
                               int depth) {
    char nm[120];
    SHOWN(nm, key, strlen(key));
    if ((unsigned)v->type >= N_TYPES)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: key '%s': value type %d is not a "
                         "GGUF type", path, nm, (int)v->type);
    if (v->type == ATTN_GGUF_TYPE_STRING && !v->v.str.s && v->v.str.len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: key '%s': NULL string", path, nm);
    if (v->type != ATTN_GGUF_TYPE_ARRAY) return ATTN_STATUS_OK;
    attn_gguf_type et = v->v.arr.type;
    if ((unsigned)et >= N_TYPES)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: key '%s': array element type %d is "
                         "not a GGUF type", path, nm, (int)et);
    if (depth + 1 >= ATTN_GGUF_MAX_DEPTH && et == ATTN_GGUF_TYPE_ARRAY)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: key '%s': arrays nested more than %d "
                         "levels deep", path, nm, ATTN_GGUF_MAX_DEPTH);
    if (v->v.arr.n && !v->v.arr.data)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: key '%s': NULL array data", path, nm);
    if (v->v.arr.n > SIZE_MAX / 32)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: key '%s': %llu array elements", path,
                         nm, (unsigned long long)v->v.arr.n);
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        if (et == ATTN_GGUF_TYPE_STRING) {
            const attn_gguf_str *s = &((const attn_gguf_str *)v->v.arr.data)[i];
            if (!s->s && s->len)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "%s: key '%s': NULL string at element %llu", path, nm,
                                 (unsigned long long)i);
        } else if (et == ATTN_GGUF_TYPE_ARRAY) {
            const attn_gguf_value *e = &((const attn_gguf_value *)v->v.arr.data)[i];
            if (e->type != ATTN_GGUF_TYPE_ARRAY)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "%s: key '%s': element %llu of an array of arrays is %s", path,
                                 nm, (unsigned long long)i, attn_gguf_type_name(e->type));
            ATTN_TRY(check_value(path, key, e, depth + 1));
        } else if (et == ATTN_GGUF_TYPE_BOOL) {
            unsigned char b;
            memcpy(&b, (const bool *)v->v.arr.data + i, 1);
            if (b > 1)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "%s: key '%s': bool element %llu is %u", path, nm,
                                 (unsigned long long)i, b);
        }
    }
    return ATTN_STATUS_OK;
}

/* One fixed-size value at p (host layout) in little-endian order. */
static attn_status w_fixed(attn_gguf_writer *w, attn_gguf_type t, const void *p) {
    unsigned char b[8];
    size_t fs = fixed_size(t);
    switch (fs) {
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        attn_st16(b, v);
        break;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        attn_st32(b, v);
        break;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, p, 8);
        attn_st64(b, v);
        break;
    }
    default: memcpy(b, p, 1); break;
    }
    return w_put(w, b, fs);
}

static attn_status w_value(attn_gguf_writer *w, const attn_gguf_value *v) {
    switch (v->type) {
    case ATTN_GGUF_TYPE_STRING: return w_str(w, v->v.str.s, v->v.str.len);
    case ATTN_GGUF_TYPE_ARRAY: {
        attn_gguf_type et = v->v.arr.type;
        ATTN_TRY(w_u32(w, (uint32_t)et));
        ATTN_TRY(w_u64(w, v->v.arr.n));
        size_t fs = fixed_size(et);
        for (uint64_t i = 0; i < v->v.arr.n; i++) {
            if (et == ATTN_GGUF_TYPE_STRING) {
                const attn_gguf_str *s = &((const attn_gguf_str *)v->v.arr.data)[i];
                ATTN_TRY(w_str(w, s->s, s->len));
            } else if (et == ATTN_GGUF_TYPE_ARRAY) {
                ATTN_TRY(w_value(w, &((const attn_gguf_value *)v->v.arr.data)[i]));
            } else {
                ATTN_TRY(w_fixed(w, et, (const unsigned char *)v->v.arr.data + i * fs));
            }
        }
        return ATTN_STATUS_OK;
    }
    default: return w_fixed(w, v->type, &v->v);
    }
}

void attn_gguf_writer_abort(attn_gguf_writer *w) {
    if (!w) return;
    attn_atomic_abort(&w->a);
    for (size_t i = 0; w->names && i < w->n_tensors; i++) free(w->names[i]);
    free(w->names);
    free(w->nbytes);
    free(w->buf);
    free(w);
}

static int cstr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Keys (or tensor names) unique: INVALID_ARGUMENT naming the first duplicate. */
static attn_status check_unique(const char *path, const char **names, size_t n, const char *what) {
    qsort(names, n, sizeof *names, cstr_cmp);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) {
            char nm[120];
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: duplicate %s '%s'", path, what,
                             SHOWN(nm, names[i], strlen(names[i])));
        }
    return ATTN_STATUS_OK;
}

static attn_status check_args(const char *path, const attn_gguf_kv *kv, size_t n_kv,
                              const attn_gguf_tensor_desc *t, size_t n_t, uint32_t *align) {
    if ((n_kv && !kv) || (n_t && !t))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL metadata or tensor list", path);
    *align = ATTN_GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < n_kv; i++) {
        if (!kv[i].key || !*kv[i].key)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: key %zu is %s", path, i,
                             kv[i].key ? "empty" : "NULL");
        ATTN_TRY(check_value(path, kv[i].key, &kv[i].val, 0));
        if (!strcmp(kv[i].key, "general.alignment")) {
            uint32_t a = kv[i].val.v.u32;
            if (kv[i].val.type != ATTN_GGUF_TYPE_UINT32 || !a || (a & (a - 1)))
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "%s: key 'general.alignment' must be a u32 power of two", path);
            *align = a;
        }
    }
    for (size_t i = 0; i < n_t; i++) {
        if (!t[i].name)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor %zu has no name", path, i);
        char nm[120];
        SHOWN(nm, t[i].name, strlen(t[i].name));
        uint64_t nb;
        uint32_t bs;
        if (!attn_gguf_dtype_block(t[i].type, &bs, NULL))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': type %d is not a "
                             "ggml type", path, nm, (int)t[i].type);
        if (t[i].n_dims < 0 || t[i].n_dims > ATTN_GGUF_MAX_DIMS)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': %d dimensions "
                             "(0..4)", path, nm, t[i].n_dims);
        for (int d = 0; d < t[i].n_dims; d++)
            if (t[i].ne[d] < 0)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': ne[%d] is %lld",
                                 path, nm, d, (long long)t[i].ne[d]);
        if ((t[i].n_dims ? t[i].ne[0] : 1) % bs)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "%s: tensor '%s': ne[0] %lld is not a multiple of the block size %u "
                             "of %s",
                             path, nm, (long long)(t[i].n_dims ? t[i].ne[0] : 1), bs,
                             attn_gguf_dtype_name(t[i].type));
        if (!attn_gguf_nbytes(t[i].type, t[i].n_dims, t[i].ne, &nb) || nb > (uint64_t)INT64_MAX)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': its byte size "
                             "overflows", path, nm);
    }
    size_t m = ATTN_MAX(n_kv, n_t);
    const char **names = malloc((m ? m : 1) * sizeof *names);
    if (!names) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    for (size_t i = 0; i < n_kv; i++) names[i] = kv[i].key;
    attn_status s = check_unique(path, names, n_kv, "key");
    for (size_t i = 0; !s && i < n_t; i++) names[i] = t[i].name;
    if (!s) s = check_unique(path, names, n_t, "tensor name");
    free(names);
    return s;
}

/* After each tensor's last byte: padding, and on to the next. */
static attn_status w_next_tensor(attn_gguf_writer *w) {
    while (w->cur < w->n_tensors && w->done == w->nbytes[w->cur]) {
        ATTN_TRY(w_pad(w));
        w->cur++;
        w->done = 0;
    }
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_writer_open(const char *path, const attn_gguf_kv *kv, size_t n_kv,
                                  const attn_gguf_tensor_desc *tensors, size_t n_tensors,
                                  attn_gguf_writer **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_writer_open: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_writer_open: empty path");
    uint32_t align = ATTN_GGUF_DEFAULT_ALIGNMENT;
    ATTN_TRY(check_args(path, kv, n_kv, tensors, n_tensors, &align));
    attn_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    w->a.fd = -1;
    w->align = align;
    w->n_tensors = n_tensors;
    w->buf = malloc(WRITE_BUFFER);
    w->nbytes = calloc(n_tensors ? n_tensors : 1, sizeof *w->nbytes);
    w->names = calloc(n_tensors ? n_tensors : 1, sizeof *w->names);
    if (!w->buf || !w->nbytes || !w->names) {
        attn_gguf_writer_abort(w);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    for (size_t i = 0; i < n_tensors; i++) {
        attn_gguf_nbytes(tensors[i].type, tensors[i].n_dims, tensors[i].ne, &w->nbytes[i]);
        size_t l = strlen(tensors[i].name);
        w->names[i] = malloc(l + 1);
        if (!w->names[i]) {
            attn_gguf_writer_abort(w);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        }
        memcpy(w->names[i], tensors[i].name, l + 1);
    }
    attn_status s = attn_atomic_begin(path, &w->a);
    if (s) {
        w->a.fd = -1;
        attn_gguf_writer_abort(w);
        return s;
    }
    w->path = w->a.path;
    s = w_put(w, GGUF_MAGIC, 4);
    if (!s) s = w_u32(w, 3);
    if (!s) s = w_u64(w, n_tensors);
    if (!s) s = w_u64(w, n_kv);
    for (size_t i = 0; !s && i < n_kv; i++) {
        s = w_str(w, kv[i].key, strlen(kv[i].key));
        if (!s) s = w_u32(w, (uint32_t)kv[i].val.type);
        if (!s) s = w_value(w, &kv[i].val);
    }
    uint64_t off = 0;
    for (size_t i = 0; !s && i < n_tensors; i++) {
        const attn_gguf_tensor_desc *t = &tensors[i];
        s = w_str(w, t->name, strlen(t->name));
        if (!s) s = w_u32(w, (uint32_t)t->n_dims);
        for (int d = 0; !s && d < t->n_dims; d++) s = w_u64(w, (uint64_t)t->ne[d]);
        if (!s) s = w_u32(w, (uint32_t)t->type);
        if (!s) s = w_u64(w, off);
        uint64_t padded = w->nbytes[i] + (align - w->nbytes[i] % align) % align;
        if (!s && padded > (uint64_t)INT64_MAX - off)
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: the tensors' sizes overflow", path);
        off += padded;
    }
    if (!s) s = w_pad(w);
    if (!s) s = w_next_tensor(w); /* empty tensors need no bytes */
    if (s) {
        attn_gguf_writer_abort(w);
        return s;
    }
    *out = w;
    return ATTN_STATUS_OK;
}

attn_status attn_gguf_writer_write(attn_gguf_writer *w, const void *data, size_t n) {
    if (!w) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_writer_write: NULL writer");
    attn_status s = ATTN_STATUS_OK;
    if (!n) return ATTN_STATUS_OK;
    if (!data) {
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL tensor data", w->path);
    } else if (w->cur >= w->n_tensors) {
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: %zu bytes after the last tensor",
                      w->path, n);
    } else if (n > w->nbytes[w->cur] - w->done) {
        char nm[120];
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                      "%s: tensor '%s' is %llu bytes, %llu written, %zu more given", w->path,
                      SHOWN(nm, w->names[w->cur], strlen(w->names[w->cur])),
                      (unsigned long long)w->nbytes[w->cur], (unsigned long long)w->done, n);
    }
    if (!s) s = w_put(w, data, n);
    if (!s) {
        w->done += n;
        s = w_next_tensor(w);
    }
    if (s) attn_gguf_writer_abort(w);
    return s;
}

attn_status attn_gguf_writer_finish(attn_gguf_writer *w) {
    if (!w) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gguf_writer_finish: NULL writer");
    attn_status s = ATTN_STATUS_OK;
    if (w->cur < w->n_tensors) {
        char nm[120];
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                      "%s: tensor '%s' got %llu of its %llu bytes, %zu tensors after it none",
                      w->path, SHOWN(nm, w->names[w->cur], strlen(w->names[w->cur])),
                      (unsigned long long)w->done, (unsigned long long)w->nbytes[w->cur],
                      w->n_tensors - w->cur - 1);
    }
    if (!s) s = w_flush(w);
    if (!s) {
        s = attn_atomic_commit(&w->a); /* releases w->a either way */
        w->a.fd = -1;
    }
    attn_gguf_writer_abort(w);
    return s;
}

attn_status attn_gguf_save(const char *path, const attn_gguf_kv *kv, size_t n_kv,
                           const attn_gguf_tensor_desc *tensors, size_t n_tensors) {
    for (size_t i = 0; i < n_tensors && tensors; i++) {
        uint64_t nb;
        if (attn_gguf_nbytes(tensors[i].type, tensors[i].n_dims, tensors[i].ne, &nb) && nb &&
            !tensors[i].data) {
            char nm[120];
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': data is NULL",
                             path ? path : "", tensors[i].name
                                 ? SHOWN(nm, tensors[i].name, strlen(tensors[i].name))
                                 : "?");
        }
    }
    attn_gguf_writer *w;
    ATTN_TRY(attn_gguf_writer_open(path, kv, n_kv, tensors, n_tensors, &w));
    for (size_t i = 0; i < n_tensors; i++) {
        uint64_t nb = w->nbytes[i];
        const unsigned char *p = tensors[i].data;
        while (nb) { /* in pieces of at most 1 GiB (size_t may be narrower than the size) */
            size_t k = (size_t)ATTN_MIN(nb, (uint64_t)1 << 30);
            ATTN_TRY(attn_gguf_writer_write(w, p, k));
            p += k;
            nb -= k;
        }
    }
    return attn_gguf_writer_finish(w);
}

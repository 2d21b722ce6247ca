/* safetensors.c — the safetensors reader (attn_st_open*, lookups, typed reads with conversion)
 * and the atomic writer (attn_st_save). The format is specified in include/attn_io.h.
 *
 * Invariants: the parser reads only through the attn_reader interface (so it runs unchanged on a
 * file, a memory buffer or fuzzer input) and validates everything before an attn_st_file is
 * handed out: header length within the file and <= 100 MB, a JSON object without duplicate keys,
 * per tensor a known dtype, <= ATTN_MAX_DIMS non-negative integer dims whose byte size does not
 * overflow, data_offsets [begin, end] with begin <= end, end - begin == that size and end within
 * the data buffer, and no two non-empty tensors overlapping. After a successful open every
 * attn_st_tensor is consistent, so reads only need the reader's own bounds checks. Conversions
 * stream through a bounded buffer (CHUNK bytes), never a whole-tensor temporary. */
#include "io-impl.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_MAX ((uint64_t)100 * 1000 * 1000)
#define CHUNK ((size_t)256 * 1024)

struct attn_st_file {
    attn_reader r;
    uint64_t data_start; /* 8 + header length */
    int n;
    attn_st_tensor *t; /* names owned (malloc) */
    const attn_st_tensor **by_name; /* into t, sorted by name, for binary search */
    int nmeta;
    char **meta; /* key, value, key, value, ... (owned) */
};

/* ---- dtypes ---- */

static const char *const dtype_names[] = {"F32", "F16", "BF16", "F64", "I64",
                                          "I32", "I16", "I8",   "U8",  "BOOL"};
static const size_t dtype_sizes[] = {4, 2, 2, 8, 8, 4, 2, 1, 1, 1};
#define NDTYPES ((int)(sizeof dtype_sizes / sizeof dtype_sizes[0]))

size_t attn_dtype_size(attn_dtype t) {
    return (unsigned)t < (unsigned)NDTYPES ? dtype_sizes[t] : 0;
}

const char *attn_dtype_name(attn_dtype t) {
    return (unsigned)t < (unsigned)NDTYPES ? dtype_names[t] : "?";
}

static int dtype_from_name(const char *s) {
    for (int i = 0; i < NDTYPES; i++)
        if (strcmp(s, dtype_names[i]) == 0) return i;
    return -1;
}

/* "[10, 4]" into buf (truncated with "..." if long). */
static const char *fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "",
                                (long long)shape[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* A name as shown in messages: control bytes (and, if ascii, all bytes >= 0x7f) escaped as
 * \xNN, cut to fit cap with "..." so one odd name cannot flood or garble the message. */
static const char *shown(char *buf, size_t cap, const char *s, bool ascii) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool esc = *p < 0x20 || *p == 0x7f || (ascii && *p >= 0x80);
        if (n + (esc ? 4 : 1) + 4 > cap) {
            memcpy(buf + n, "...", 4);
            return buf;
        }
        if (esc) n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", *p);
        else buf[n++] = (char)*p;
    }
    buf[n] = '\0';
    return buf;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return json_integer_value(v) < 0 ? "a negative integer" : "an integer";
    case JSON_REAL: return "a floating-point number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown value";
}

/* ---- opening ---- */

void attn_st_close(attn_st_file *f) {
    if (!f) return;
    attn_reader_close(&f->r);
    for (int i = 0; i < f->n; i++) free((char *)f->t[i].name);
    free(f->t);
    free(f->by_name);
    for (int i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
    free(f->meta);
    free(f);
}

/* A non-negative JSON integer, or a FORMAT failure naming file, tensor and field. */
static attn_status get_uint(const attn_st_file *f, const char *tname, const char *field, int idx,
                            const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        char where[64];
        if (idx >= 0) snprintf(where, sizeof where, "%s[%d]", field, idx);
        else snprintf(where, sizeof where, "%s", field);
        if (json_is_integer(v))
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tensor '%s': %s must be a non-negative integer, got %lld",
                             f->r.name, tname, where, (long long)json_integer_value(v));
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': %s must be a non-negative integer, got %s", f->r.name,
                         tname, where, json_kind(v));
    }
    *out = (uint64_t)json_integer_value(v);
    return ATTN_STATUS_OK;
}

static attn_status parse_tensor(attn_st_file *f, const char *key, const json_t *v,
                                uint64_t data_size, attn_st_tensor *t) {
    const char *file = f->r.name;
    char name[160];
    shown(name, sizeof name, key, false);
    if (!json_is_object(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s': entry must be an object, got %s",
                         file, name, json_kind(v));
    const json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
                 *jo = json_object_get(v, "data_offsets");
    if (!jd || !js || !jo)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s': missing \"%s\"", file, name,
                         !jd ? "dtype" : !js ? "shape" : "data_offsets");
    if (!json_is_string(jd))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s': dtype must be a string, got %s",
                         file, name, json_kind(jd));
    int dt = dtype_from_name(json_string_value(jd));
    char dts[48];
    if (dt < 0)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': unknown dtype \"%.40s\" (expected F32, F16, BF16, "
                         "F64, I64, I32, I16, I8, U8 or BOOL)",
                         file, name, shown(dts, sizeof dts, json_string_value(jd), false));
    t->dtype = (attn_dtype)dt;
    if (!json_is_array(js))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s': shape must be an array, got %s",
                         file, name, json_kind(js));
    size_t nd = json_array_size(js);
    if (nd > ATTN_MAX_DIMS)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': shape has %zu dimensions, at most %d are supported",
                         file, name, nd, ATTN_MAX_DIMS);
    t->ndim = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        attn_status s = get_uint(f, name, "shape", (int)i, json_array_get(js, i), &d);
        if (s) return s;
        t->shape[i] = (int64_t)d; /* <= LLONG_MAX: it came from a json_int_t */
    }
    char sh[256];
    size_t numel, nbytes;
    fmt_shape(sh, sizeof sh, t->ndim, t->shape);
    if (!attn_size_prod(t->shape, t->ndim, &numel) ||
        !attn_size_mul(numel, dtype_sizes[dt], &nbytes))
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': the byte size of shape %s of %s overflows", file, name,
                         sh, dtype_names[dt]);
    t->numel = numel;
    t->nbytes = nbytes;
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': data_offsets must be an array [begin, end], got %s",
                         file, name, json_is_array(jo) ? "an array of another length" : json_kind(jo));
    uint64_t b, e;
    attn_status s = get_uint(f, name, "data_offsets", 0, json_array_get(jo, 0), &b);
    if (!s) s = get_uint(f, name, "data_offsets", 1, json_array_get(jo, 1), &e);
    if (s) return s;
    if (b > e)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': data_offsets [%llu, %llu] begin after end", file, name,
                         (unsigned long long)b, (unsigned long long)e);
    if (e - b != nbytes)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': data_offsets [%llu, %llu] do not match shape %s of %s "
                         "(%zu bytes)",
                         file, name, (unsigned long long)b, (unsigned long long)e, sh,
                         dtype_names[dt], nbytes);
    if (e > data_size)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s': data_offsets [%llu, %llu] are past the end of the data "
                         "buffer (%llu bytes; file truncated?)",
                         file, name, (unsigned long long)b, (unsigned long long)e,
                         (unsigned long long)data_size);
    t->offset = f->data_start + b;
    return ATTN_STATUS_OK;
}

static attn_status parse_metadata(attn_st_file *f, const json_t *m) {
    if (json_is_null(m)) return ATTN_STATUS_OK;
    if (!json_is_object(m))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: __metadata__ must be an object, got %s",
                         f->r.name, json_kind(m));
    size_t n = json_object_size(m);
    f->meta = calloc(2 * n + 1, sizeof *f->meta);
    if (!f->meta) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", f->r.name);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        if (!json_is_string(v)) {
            char ks[160];
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: __metadata__ value of '%s' must be a string, got %s", f->r.name,
                             shown(ks, sizeof ks, k, false), json_kind(v));
        }
        char *dk = dup_str(k), *dv = dup_str(json_string_value(v));
        f->meta[2 * f->nmeta] = dk;
        f->meta[2 * f->nmeta + 1] = dv;
        f->nmeta++;
        if (!dk || !dv) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", f->r.name);
    }
    return ATTN_STATUS_OK;
}

typedef struct {
    uint64_t b, e;
    int i;
} span;

static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    if (a->e != b->e) return a->e < b->e ? -1 : 1;
    return a->i - b->i;
}

static int name_cmp(const void *x, const void *y) {
    const attn_st_tensor *a = *(const attn_st_tensor *const *)x, *b = *(const attn_st_tensor *const *)y;
    return strcmp(a->name, b->name);
}

static attn_status check_overlap(attn_st_file *f) {
    if (f->n < 2) return ATTN_STATUS_OK;
    span *sp = malloc((size_t)f->n * sizeof *sp);
    if (!sp) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", f->r.name);
    for (int i = 0; i < f->n; i++) {
        sp[i].b = f->t[i].offset;
        sp[i].e = f->t[i].offset + f->t[i].nbytes;
        sp[i].i = i;
    }
    qsort(sp, (size_t)f->n, sizeof *sp, span_cmp);
    attn_status s = ATTN_STATUS_OK;
    int last = -1; /* the non-empty tensor reaching furthest so far */
    for (int k = 0; k < f->n; k++) {
        if (sp[k].e == sp[k].b) continue; /* empty tensors occupy no bytes */
        if (last >= 0 && sp[k].b < sp[last].e) {
            const attn_st_tensor *a = &f->t[sp[last].i], *b = &f->t[sp[k].i];
            char an[120], bn[120];
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensors '%s' (data_offsets [%llu, %llu]) and '%s' ([%llu, %llu]) "
                          "overlap",
                          f->r.name, shown(an, sizeof an, a->name, false),
                          (unsigned long long)(a->offset - f->data_start),
                          (unsigned long long)(a->offset - f->data_start + a->nbytes),
                          shown(bn, sizeof bn, b->name, false),
                          (unsigned long long)(b->offset - f->data_start),
                          (unsigned long long)(b->offset - f->data_start + b->nbytes));
            break;
        }
        if (last < 0 || sp[k].e > sp[last].e) last = k;
    }
    free(sp);
    return s;
}

static attn_status parse_header(attn_st_file *f, json_t *root, uint64_t data_size) {
    const char *file = f->r.name;
    if (!json_is_object(root))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: header must be a JSON object, got %s", file,
                         json_kind(root));
    size_t cnt = json_object_size(root);
    if (cnt > (size_t)INT_MAX / 2)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: too many header entries (%zu)", file, cnt);
    f->t = calloc(cnt + 1, sizeof *f->t);
    if (!f->t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", file);
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        attn_status s;
        if (strcmp(k, "__metadata__") == 0) {
            s = parse_metadata(f, v);
            if (s) return s;
            continue;
        }
        attn_st_tensor *t = &f->t[f->n];
        s = parse_tensor(f, k, v, data_size, t);
        if (s) return s;
        t->name = dup_str(k);
        if (!t->name) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", file);
        f->n++;
    }
    attn_status s = check_overlap(f);
    if (s) return s;
    f->by_name = malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!f->by_name) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", file);
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, name_cmp);
    return ATTN_STATUS_OK;
}

attn_status attn_st_open_reader(attn_reader r, attn_st_file **out) {
    if (!out) {
        attn_reader_close(&r);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_st_open_reader: out is NULL");
    }
    *out = NULL;
    const char *name = r.name ? r.name : "<reader>";
    if (!r.read) {
        attn_reader_close(&r);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_st_open_reader: reader has no read");
    }
    attn_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        attn_status s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
        attn_reader_close(&r);
        return s;
    }
    f->r = r;
    f->r.name = name;
    attn_status s;
    unsigned char lenb[8];
    if (r.size < 8) {
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: file is %llu bytes, too short for the 8-byte safetensors header length",
                      name, (unsigned long long)r.size);
        goto fail;
    }
    if ((s = f->r.read(f->r.ctx, 0, lenb, 8))) goto fail;
    uint64_t hlen = attn_ld64(lenb);
    if (hlen > r.size - 8) {
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: header length %llu is past the end of the file (%llu bytes; not a "
                      "safetensors file, or truncated)",
                      name, (unsigned long long)hlen, (unsigned long long)r.size);
        goto fail;
    }
    if (hlen > HEADER_MAX) {
        s = attn_fail(ATTN_STATUS_TOO_LARGE,
                      "%s: header length %llu is too large (limit %llu bytes)", name,
                      (unsigned long long)hlen, (unsigned long long)HEADER_MAX);
        goto fail;
    }
    if (hlen < 2) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: header length %llu is too small for a JSON object",
                      name, (unsigned long long)hlen);
        goto fail;
    }
    f->data_start = 8 + hlen;
    char *hdr = malloc((size_t)hlen);
    if (!hdr) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory for a %llu-byte header", name,
                      (unsigned long long)hlen);
        goto fail;
    }
    if ((s = f->r.read(f->r.ctx, 8, hdr, (size_t)hlen))) {
        free(hdr);
        goto fail;
    }
    json_error_t err;
    json_t *root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    free(hdr);
    if (!root) {
        char et[sizeof err.text + 8];
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: header is not valid JSON: %s (line %d, column %d, byte %d)", name,
                      shown(et, sizeof et, err.text, false), err.line, err.column, err.position);
        goto fail;
    }
    s = parse_header(f, root, r.size - f->data_start);
    json_decref(root);
    if (s) goto fail;
    *out = f;
    return ATTN_STATUS_OK;
fail:
    attn_st_close(f);
    return s;
}

attn_status attn_st_open(const char *path, attn_st_file **out) {
    if (out) *out = NULL;
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_st_open: out is NULL");
    attn_reader r;
    attn_status s = attn_reader_open_file(path, &r);
    if (s) return s;
    return attn_st_open_reader(r, out);
}

/* ---- lookups ---- */

int attn_st_count(const attn_st_file *f) { return f ? f->n : 0; }

const attn_st_tensor *attn_st_tensor_at(const attn_st_file *f, int i) {
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const attn_st_tensor *attn_st_find(const attn_st_file *f, const char *name) {
    if (!f || !name) return NULL;
    int lo = 0, hi = f->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const attn_st_tensor *t = f->by_name[mid];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const char *attn_st_metadata(const attn_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

/* ---- typed reads ---- */

static attn_status find_checked(attn_st_file *f, const char *name, const char *fn,
                                const attn_st_tensor **out) {
    if (!f || !name)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: file or tensor name is NULL", fn);
    const attn_st_tensor *t = attn_st_find(f, name);
    if (!t) {
        char nm[160];
        return attn_fail(ATTN_STATUS_NOT_FOUND, "%s: no tensor '%s' (the file has %d tensors)",
                         f->r.name, shown(nm, sizeof nm, name, false), f->n);
    }
    *out = t;
    return ATTN_STATUS_OK;
}

static bool is_float_dtype(attn_dtype d) {
    return d == ATTN_DTYPE_F32 || d == ATTN_DTYPE_F16 || d == ATTN_DTYPE_BF16 ||
           d == ATTN_DTYPE_F64;
}

static attn_status read_as_f32(attn_st_file *f, const attn_st_tensor *t, float *dst) {
    if (!is_float_dtype(t->dtype))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: tensor '%s' has dtype %s, expected F32, F16, BF16 or F64",
                         f->r.name, t->name, dtype_names[t->dtype]);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (t->dtype == ATTN_DTYPE_F32) return f->r.read(f->r.ctx, t->offset, dst, (size_t)t->nbytes);
#endif
    size_t es = dtype_sizes[t->dtype], per = CHUNK / es;
    unsigned char *buf = malloc(t->numel < per ? t->numel * es + 1 : CHUNK);
    if (!buf) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", f->r.name);
    attn_status s = ATTN_STATUS_OK;
    for (size_t i = 0; i < t->numel; i += per) {
        size_t m = ATTN_MIN(per, t->numel - i);
        if ((s = f->r.read(f->r.ctx, t->offset + (uint64_t)i * es, buf, m * es))) break;
        float *o = dst + i;
        switch (t->dtype) {
        case ATTN_DTYPE_F32:
            for (size_t j = 0; j < m; j++) o[j] = attn_bits_f32(attn_ld32(buf + 4 * j));
            break;
        case ATTN_DTYPE_F16:
            for (size_t j = 0; j < m; j++) o[j] = attn_f16_to_f32(attn_ld16(buf + 2 * j));
            break;
        case ATTN_DTYPE_BF16:
            for (size_t j = 0; j < m; j++) o[j] = attn_bf16_to_f32(attn_ld16(buf + 2 * j));
            break;
        default: /* F64 */
            for (size_t j = 0; j < m; j++) {
                uint64_t u = attn_ld64(buf + 8 * j);
                double d;
                memcpy(&d, &u, sizeof d);
                o[j] = attn_f64_to_f32(d);
            }
            break;
        }
    }
    free(buf);
    return s;
}

attn_status attn_st_read_f32(attn_st_file *f, const char *name, int ndim, const int64_t *shape,
                             float *dst) {
    const attn_st_tensor *t = NULL;
    attn_status s = find_checked(f, name, "attn_st_read_f32", &t);
    if (s) return s;
    char nm[160];
    shown(nm, sizeof nm, name, false);
    if (ndim >= 0) {
        bool same = ndim == t->ndim && (ndim == 0 || shape);
        for (int i = 0; same && i < ndim; i++) same = shape[i] == t->shape[i];
        if (!same) {
            char a[256], b[256];
            if (ndim > ATTN_MAX_DIMS || (ndim > 0 && !shape)) snprintf(b, sizeof b, "(%d dims)", ndim);
            else fmt_shape(b, sizeof b, ndim, shape);
            return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' has shape %s, expected %s",
                             f->r.name, nm, fmt_shape(a, sizeof a, t->ndim, t->shape), b);
        }
    }
    if (!dst && t->numel)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': dst is NULL", f->r.name,
                         nm);
    return read_as_f32(f, t, dst);
}

attn_status attn_st_load_f32(attn_st_file *f, const char *name, float **data,
                             const attn_st_tensor **tp) {
    if (data) *data = NULL;
    if (!data) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_st_load_f32: data is NULL");
    const attn_st_tensor *t = NULL;
    attn_status s = find_checked(f, name, "attn_st_load_f32", &t);
    if (s) return s;
    char nm[160];
    shown(nm, sizeof nm, name, false);
    size_t bytes;
    if (!attn_size_mul(t->numel, sizeof(float), &bytes))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: tensor '%s' is too large", f->r.name, nm);
    float *p = attn_alloc(bytes);
    if (!p)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: tensor '%s': cannot allocate %zu bytes",
                         f->r.name, nm, bytes);
    if ((s = read_as_f32(f, t, p))) {
        attn_free(p);
        return s;
    }
    *data = p;
    if (tp) *tp = t;
    return ATTN_STATUS_OK;
}

attn_status attn_st_load_i32(attn_st_file *f, const char *name, int32_t **data,
                             const attn_st_tensor **tp) {
    if (data) *data = NULL;
    if (!data) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_st_load_i32: data is NULL");
    const attn_st_tensor *t = NULL;
    attn_status s = find_checked(f, name, "attn_st_load_i32", &t);
    if (s) return s;
    char nm[160];
    shown(nm, sizeof nm, name, false);
    if (is_float_dtype(t->dtype))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: tensor '%s' has dtype %s, expected I64, I32, I16, I8, U8 or BOOL",
                         f->r.name, nm, dtype_names[t->dtype]);
    size_t bytes;
    if (!attn_size_mul(t->numel, sizeof(int32_t), &bytes))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: tensor '%s' is too large", f->r.name, nm);
    int32_t *dst = attn_alloc(bytes);
    size_t es = dtype_sizes[t->dtype], per = CHUNK / es;
    unsigned char *buf = malloc(t->numel < per ? t->numel * es + 1 : CHUNK);
    if (!dst || !buf) {
        attn_free(dst);
        free(buf);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: tensor '%s': out of memory", f->r.name,
                         nm);
    }
    for (size_t i = 0; i < t->numel && !s; i += per) {
        size_t m = ATTN_MIN(per, t->numel - i);
        if ((s = f->r.read(f->r.ctx, t->offset + (uint64_t)i * es, buf, m * es))) break;
        int32_t *o = dst + i;
        for (size_t j = 0; j < m; j++) {
            int64_t v;
            switch (t->dtype) {
            case ATTN_DTYPE_I64: v = (int64_t)attn_ld64(buf + 8 * j); break;
            case ATTN_DTYPE_I32: v = (int32_t)attn_ld32(buf + 4 * j); break;
            case ATTN_DTYPE_I16: v = (int16_t)attn_ld16(buf + 2 * j); break;
            case ATTN_DTYPE_I8: v = (int8_t)buf[j]; break;
            default: v = buf[j]; break; /* U8, BOOL */
            }
            if (t->dtype == ATTN_DTYPE_BOOL && v > 1) {
                s = attn_fail(ATTN_STATUS_FORMAT,
                              "%s: tensor '%s': element %zu of BOOL is %lld, expected 0 or 1",
                              f->r.name, nm, i + j, (long long)v);
                break;
            }
            if (v < INT32_MIN || v > INT32_MAX) {
                s = attn_fail(ATTN_STATUS_TOO_LARGE,
                              "%s: tensor '%s': element %zu = %lld is outside the int32 range",
                              f->r.name, nm, i + j, (long long)v);
                break;
            }
            o[j] = (int32_t)v;
        }
    }
    free(buf);
    if (s) {
        attn_free(dst);
        return s;
    }
    *data = dst;
    if (tp) *tp = t;
    return ATTN_STATUS_OK;
}

/* ---- writing ---- */

attn_status attn_st_save(const char *path, const attn_st_entry *tensors, int n,
                         const char *const *meta) {
    if (!path || !*path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_st_save: empty path");
    if (n < 0 || (n > 0 && !tensors))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: bad tensor list (n = %d)", path, n);
    attn_status s = ATTN_STATUS_OK;
    json_t *root = json_object();
    size_t *sizes = malloc(((size_t)n + 1) * sizeof *sizes);
    char *hdr = NULL;
    if (!root || !sizes) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    if (meta) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m)) {
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
            goto done;
        }
        for (int i = 0; meta[i]; i += 2) {
            char shu[160];
            if (!meta[i + 1]) {
                s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: metadata key '%s' has no value (the list must be key, value "
                              "pairs ending in NULL)",
                              path, shown(shu, sizeof shu, meta[i], true));
                goto done;
            }
            json_t *v = json_string(meta[i + 1]);
            if (!v) {
                s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: metadata value of '%s' is not valid UTF-8", path,
                              shown(shu, sizeof shu, meta[i], true));
                goto done;
            }
            if (json_object_get(m, meta[i])) {
                json_decref(v);
                s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: duplicate metadata key '%s'",
                              path, shown(shu, sizeof shu, meta[i], true));
                goto done;
            }
            if (json_object_set_new(m, meta[i], v)) {
                s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: metadata key '%s' is not valid UTF-8", path,
                              shown(shu, sizeof shu, meta[i], true));
                goto done;
            }
        }
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const attn_st_entry *e = &tensors[i];
        const char *nm = e->name;
        if (!nm) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor %d has no name", path, i);
            goto done;
        }
        char shn[160], shu[160];
        shown(shn, sizeof shn, nm, false);
        if (strcmp(nm, "__metadata__") == 0) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "%s: tensor name '__metadata__' is reserved", path);
            goto done;
        }
        if (json_object_get(root, nm)) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: duplicate tensor name '%s'", path,
                          shn);
            goto done;
        }
        if ((unsigned)e->dtype >= (unsigned)NDTYPES) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': invalid dtype %d", path,
                          shn, (int)e->dtype);
            goto done;
        }
        if (e->ndim < 0 || e->ndim > ATTN_MAX_DIMS) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "%s: tensor '%s': ndim %d outside [0, %d]", path, shn, e->ndim,
                          ATTN_MAX_DIMS);
            goto done;
        }
        size_t numel;
        if (!attn_size_prod(e->shape, e->ndim, &numel) ||
            !attn_size_mul(numel, dtype_sizes[e->dtype], &sizes[i]) ||
            (uint64_t)sizes[i] > (uint64_t)INT64_MAX - off) {
            char sh[256];
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "%s: tensor '%s': shape %s is negative or too large", path, shn,
                          fmt_shape(sh, sizeof sh, e->ndim, e->shape));
            goto done;
        }
        if (sizes[i] && !e->data) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': data is NULL", path,
                          shn);
            goto done;
        }
        json_t *shape = json_array(), *offs = json_array(), *obj = json_object();
        json_t *dt = json_string(dtype_names[e->dtype]);
        bool ok = shape && offs && obj && dt;
        for (int d = 0; ok && d < e->ndim; d++)
            ok = json_array_append_new(shape, json_integer(e->shape[d])) == 0;
        ok = ok && json_array_append_new(offs, json_integer((json_int_t)off)) == 0 &&
             json_array_append_new(offs, json_integer((json_int_t)(off + sizes[i]))) == 0;
        if (ok) {
            ok = json_object_set_new(obj, "dtype", dt) == 0;
            dt = NULL;
            ok = ok && json_object_set_new(obj, "shape", shape) == 0;
            shape = NULL;
            ok = ok && json_object_set_new(obj, "data_offsets", offs) == 0;
            offs = NULL;
        }
        json_decref(shape);
        json_decref(offs);
        json_decref(dt);
        if (!ok) {
            json_decref(obj);
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
            goto done;
        }
        if (json_object_set_new(root, nm, obj)) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "%s: tensor name '%s' is not valid UTF-8", path,
                          shown(shu, sizeof shu, nm, true));
            goto done;
        }
        off += sizes[i];
    }
    hdr = json_dumps(root, JSON_COMPACT);
    if (!hdr) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: cannot serialize the header", path);
        goto done;
    }
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    unsigned char lenb[8];
    attn_st64(lenb, padded);
    static const char spaces[8] = "        ";
    attn_atomic a;
    if ((s = attn_atomic_begin(path, &a))) goto done;
    s = attn_atomic_write(&a, lenb, 8);
    if (!s) s = attn_atomic_write(&a, hdr, hl);
    if (!s) s = attn_atomic_write(&a, spaces, padded - hl);
    for (int i = 0; i < n && !s; i++)
        if (sizes[i]) s = attn_atomic_write(&a, tensors[i].data, sizes[i]);
    if (s) attn_atomic_abort(&a);
    else s = attn_atomic_commit(&a);
done:
    free(hdr);
    free(sizes);
    json_decref(root);
    return s;
}

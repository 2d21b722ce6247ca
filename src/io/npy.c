/* npy.c — NumPy .npy save (float32, version 1.0, atomic) and load ('<f4' / '<f8' → float32).
 *
 * Invariants: the writer produces the same bytes as numpy.save for a C-order float32 array
 * (header dict with sorted keys, the spare space numpy leaves after the shape, padding so the
 * data starts at a multiple of 64, a final '\n'). The loader reads only through an attn_reader,
 * accepts versions 1.0, 2.0 and 3.0 and parses the header dict strictly: exactly the keys descr,
 * fortran_order and shape, each once, a string / boolean / tuple of non-negative integers, and
 * nothing but whitespace after the closing brace. The data must be exactly
 * product(shape) * itemsize bytes, checked before anything is allocated. */
#include "io-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_HEADER_MAX ((uint64_t)1 << 20) /* numpy itself refuses headers over 10000 bytes */
#define NPY_CHUNK ((size_t)256 * 1024)

/* ---- saving ---- */

attn_status attn_npy_save_f32(const char *path, const float *data, int ndim,
                              const int64_t *shape) {
    if (!path || !*path)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_npy_save_f32: empty path");
    if (ndim < 0 || ndim > ATTN_MAX_DIMS || (ndim > 0 && !shape))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: ndim %d outside [0, %d]", path, ndim,
                         ATTN_MAX_DIMS);
    size_t numel, nbytes;
    if (!attn_size_prod(shape, ndim, &numel) || !attn_size_mul(numel, 4, &nbytes))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: shape is negative or too large",
                         path);
    if (nbytes && !data) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: data is NULL", path);
    /* Header text: "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" then, as numpy
     * >= 1.23 does, 21 - len(repr(shape[0])) spaces of room to grow the first axis in place. */
    char hdr[512];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < ndim; i++)
        len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%s%lld", i ? ", " : "",
                        (long long)shape[i]);
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%s), }", ndim == 1 ? "," : "");
    if (ndim > 0) {
        int digits = snprintf(NULL, 0, "%lld", (long long)shape[0]);
        for (int i = digits; i < 21; i++) hdr[len++] = ' ';
    }
    /* magic (6) + version (2) + uint16 length (2) + header + padding + '\n' ≡ 0 (mod 64), with
     * at least one padding byte... numpy pads by 64 - (10 + len + 1) % 64, which is 1..64. */
    int pad = 64 - (10 + len + 1) % 64;
    for (int i = 0; i < pad; i++) hdr[len++] = ' ';
    hdr[len++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    attn_atomic a;
    attn_status s = attn_atomic_begin(path, &a);
    if (s) return s;
    s = attn_atomic_write(&a, pre, sizeof pre);
    if (!s) s = attn_atomic_write(&a, hdr, (size_t)len);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (!s && nbytes) s = attn_atomic_write(&a, data, nbytes);
#else
    {
        unsigned char buf[4096];
        for (size_t i = 0; i < numel && !s; i += 1024) {
            size_t m = ATTN_MIN((size_t)1024, numel - i);
            for (size_t j = 0; j < m; j++) {
                uint32_t u;
                memcpy(&u, &data[i + j], 4);
                for (int b = 0; b < 4; b++) buf[4 * j + b] = (unsigned char)(u >> (8 * b));
            }
            s = attn_atomic_write(&a, buf, 4 * m);
        }
    }
#endif
    if (s) {
        attn_atomic_abort(&a);
        return s;
    }
    return attn_atomic_commit(&a);
}

/* ---- loading: a small parser for the header's Python dict literal ---- */

typedef struct {
    const char *p, *end;
    const char *file;
} lexer;

static void skip_ws(lexer *L) {
    while (L->p < L->end && (*L->p == ' ' || *L->p == '\t' || *L->p == '\n' || *L->p == '\r'))
        L->p++;
}

static bool eat(lexer *L, char c) {
    skip_ws(L);
    if (L->p < L->end && *L->p == c) {
        L->p++;
        return true;
    }
    return false;
}

static attn_status bad(const lexer *L, const char *what, const char *hdr) {
    return attn_fail(ATTN_STATUS_FORMAT, "%s: .npy header: %s at byte %d of the header", L->file,
                     what, (int)(L->p - hdr));
}

/* A '...' or "..." string without escapes into out (cap bytes). */
static bool lex_string(lexer *L, char *out, size_t cap) {
    skip_ws(L);
    if (L->p >= L->end || (*L->p != '\'' && *L->p != '"')) return false;
    char q = *L->p++;
    size_t n = 0;
    while (L->p < L->end && *L->p != q) {
        unsigned char c = (unsigned char)*L->p;
        if (c == '\\' || c < 0x20 || c >= 0x7f || n + 1 >= cap) return false; /* ASCII only */
        out[n++] = *L->p++;
    }
    if (L->p >= L->end) return false;
    L->p++;
    out[n] = '\0';
    return true;
}

static bool lex_word(lexer *L, const char *w) {
    skip_ws(L);
    size_t n = strlen(w);
    if ((size_t)(L->end - L->p) >= n && memcmp(L->p, w, n) == 0) {
        L->p += n;
        return true;
    }
    return false;
}

/* Parse the dict; fills descr, fortran, ndim, shape. */
static attn_status parse_npy_header(const char *file, const char *hdr, size_t n, char *descr,
                                    size_t dcap, bool *fortran, int *ndim, int64_t *shape) {
    lexer L = {hdr, hdr + n, file};
    bool have_d = false, have_f = false, have_s = false;
    if (!eat(&L, '{')) return bad(&L, "expected '{'", hdr);
    for (;;) {
        if (eat(&L, '}')) break;
        char key[32];
        if (!lex_string(&L, key, sizeof key)) return bad(&L, "expected a quoted key or '}'", hdr);
        if (!eat(&L, ':')) return bad(&L, "expected ':'", hdr);
        if (strcmp(key, "descr") == 0) {
            if (have_d) return bad(&L, "duplicate key 'descr'", hdr);
            have_d = true;
            skip_ws(&L);
            if (L.p < L.end && *L.p == '[')
                return attn_fail(ATTN_STATUS_UNSUPPORTED,
                                 "%s: structured dtypes are not supported, expected '<f4' or "
                                 "'<f8'",
                                 file);
            if (!lex_string(&L, descr, dcap)) return bad(&L, "descr must be a short string", hdr);
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_f) return bad(&L, "duplicate key 'fortran_order'", hdr);
            have_f = true;
            if (lex_word(&L, "True")) *fortran = true;
            else if (lex_word(&L, "False")) *fortran = false;
            else return bad(&L, "fortran_order must be True or False", hdr);
        } else if (strcmp(key, "shape") == 0) {
            if (have_s) return bad(&L, "duplicate key 'shape'", hdr);
            have_s = true;
            if (!eat(&L, '(')) return bad(&L, "shape must be a tuple", hdr);
            int nd = 0;
            bool need_sep = false, saw_comma = false;
            for (;;) {
                if (eat(&L, ')')) break;
                if (need_sep) {
                    if (!eat(&L, ',')) return bad(&L, "expected ',' or ')' in shape", hdr);
                    saw_comma = true;
                    need_sep = false;
                    continue;
                }
                skip_ws(&L);
                if (L.p >= L.end || *L.p < '0' || *L.p > '9')
                    return bad(&L, "shape entries must be non-negative integers", hdr);
                uint64_t v = 0;
                while (L.p < L.end && *L.p >= '0' && *L.p <= '9') {
                    if (v > ((uint64_t)INT64_MAX - 9) / 10)
                        return attn_fail(ATTN_STATUS_FORMAT,
                                         "%s: .npy shape dimension %d is absurdly large", file,
                                         nd);
                    v = v * 10 + (uint64_t)(*L.p++ - '0');
                }
                if (nd == ATTN_MAX_DIMS)
                    return attn_fail(ATTN_STATUS_FORMAT,
                                     "%s: .npy shape has more than %d dimensions", file,
                                     ATTN_MAX_DIMS);
                shape[nd++] = (int64_t)v;
                need_sep = true;
            }
            if (nd == 1 && !saw_comma)
                return bad(&L, "shape '(n)' is not a tuple (expected '(n,)')", hdr);
            *ndim = nd;
        } else {
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: .npy header has unexpected key '%s' (expected descr, "
                             "fortran_order, shape)",
                             file, key);
        }
        if (!eat(&L, ',')) {
            if (eat(&L, '}')) break;
            return bad(&L, "expected ',' or '}'", hdr);
        }
    }
    skip_ws(&L);
    if (L.p != L.end) return bad(&L, "unexpected text after the header dict", hdr);
    if (!have_d || !have_f || !have_s)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: .npy header lacks the key '%s'", file,
                         !have_d ? "descr" : !have_f ? "fortran_order" : "shape");
    return ATTN_STATUS_OK;
}

attn_status attn_npy_load_f32_reader(attn_reader r, float **data, int *ndim,
                                     int64_t shape[ATTN_MAX_DIMS]) {
    const char *file = r.name ? r.name : "<reader>";
    attn_status s = ATTN_STATUS_OK;
    char *hdr = NULL;
    unsigned char *buf = NULL;
    float *out = NULL;
    if (data) *data = NULL;
    if (!data || !ndim || !shape || !r.read) {
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: attn_npy_load_f32: NULL argument", file);
        goto done;
    }
    unsigned char pre[12];
    if (r.size < 10) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: file is %llu bytes, too short for a .npy header",
                      file, (unsigned long long)r.size);
        goto done;
    }
    if ((s = r.read(r.ctx, 0, pre, 10))) goto done;
    if (memcmp(pre, "\x93NUMPY", 6) != 0) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: not a .npy file (bad magic, expected \\x93NUMPY)",
                      file);
        goto done;
    }
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: .npy version %d.%d is not supported (expected 1.0, 2.0 or 3.0)", file,
                      major, minor);
        goto done;
    }
    uint64_t hstart = major == 1 ? 10 : 12, hlen;
    if (major == 1) hlen = attn_ld16(pre + 8);
    else {
        if (r.size < 12 || (s = r.read(r.ctx, 10, pre + 10, 2))) {
            if (!s)
                s = attn_fail(ATTN_STATUS_FORMAT, "%s: file too short for a .npy %d.0 header",
                              file, major);
            goto done;
        }
        hlen = attn_ld32(pre + 8);
    }
    if (hlen > r.size - hstart) {
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: .npy header length %llu is past the end of the file (%llu bytes)",
                      file, (unsigned long long)hlen, (unsigned long long)r.size);
        goto done;
    }
    if (hlen > NPY_HEADER_MAX) {
        s = attn_fail(ATTN_STATUS_TOO_LARGE, "%s: .npy header length %llu is too large", file,
                      (unsigned long long)hlen);
        goto done;
    }
    hdr = malloc((size_t)hlen + 1);
    if (!hdr) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", file);
        goto done;
    }
    if ((s = r.read(r.ctx, hstart, hdr, (size_t)hlen))) goto done;
    hdr[hlen] = '\0';
    char descr[32];
    bool fortran = false;
    int nd = 0;
    int64_t shp[ATTN_MAX_DIMS] = {0};
    if ((s = parse_npy_header(file, hdr, (size_t)hlen, descr, sizeof descr, &fortran, &nd, shp)))
        goto done;
    size_t es;
    if (strcmp(descr, "<f4") == 0) es = 4;
    else if (strcmp(descr, "<f8") == 0) es = 8;
    else {
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: .npy dtype '%s' is not supported (expected '<f4' or '<f8')", file,
                      descr);
        goto done;
    }
    if (fortran) {
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: .npy array is in Fortran order; only C order (fortran_order False) is "
                      "supported",
                      file);
        goto done;
    }
    size_t numel, nbytes, obytes;
    uint64_t avail = r.size - hstart - hlen;
    if (!attn_size_prod(shp, nd, &numel) || !attn_size_mul(numel, es, &nbytes) ||
        !attn_size_mul(numel, sizeof(float), &obytes)) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: .npy shape is absurd: its byte size overflows",
                      file);
        goto done;
    }
    if ((uint64_t)nbytes != avail) {
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: .npy shape needs %zu bytes of data (%zu x %s), the file has %llu%s",
                      file, nbytes, numel, descr, (unsigned long long)avail,
                      (uint64_t)nbytes > avail ? " (truncated)" : " (trailing bytes)");
        goto done;
    }
    out = attn_alloc(obytes);
    if (!out) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", file, obytes);
        goto done;
    }
    size_t per = NPY_CHUNK / es;
    buf = malloc(numel < per ? numel * es + 1 : NPY_CHUNK);
    if (!buf) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", file);
        goto done;
    }
    uint64_t base = hstart + hlen;
    for (size_t i = 0; i < numel; i += per) {
        size_t m = ATTN_MIN(per, numel - i);
        if ((s = r.read(r.ctx, base + (uint64_t)i * es, buf, m * es))) goto done;
        if (es == 4)
            for (size_t j = 0; j < m; j++) out[i + j] = attn_bits_f32(attn_ld32(buf + 4 * j));
        else
            for (size_t j = 0; j < m; j++) {
                uint64_t u = attn_ld64(buf + 8 * j);
                double d;
                memcpy(&d, &u, sizeof d);
                out[i + j] = attn_f64_to_f32(d);
            }
    }
    *data = out;
    out = NULL;
    *ndim = nd;
    for (int i = 0; i < ATTN_MAX_DIMS; i++) shape[i] = i < nd ? shp[i] : 0;
done:
    attn_free(out);
    free(buf);
    free(hdr);
    attn_reader_close(&r);
    return s;
}

attn_status attn_npy_load_f32(const char *path, float **data, int *ndim,
                              int64_t shape[ATTN_MAX_DIMS]) {
    if (data) *data = NULL;
    attn_reader r;
    attn_status s = attn_reader_open_file(path, &r);
    if (s) return s;
    return attn_npy_load_f32_reader(r, data, ndim, shape);
}

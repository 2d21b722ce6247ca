/* json.c — a capture's maps as one JSON text in memory (attn_viz_to_json), the answer of
 * `attn serve`'s POST /v1/attention. The probabilities are most of it (SmolLM2's 30 layers x 9
 * heads on 230 tokens: 14 M values, 108 MB of JSON), so they are written straight into one
 * buffer, not built as a jansson tree (one json_real per value: 5.0 s and ~800 MB more peak
 * memory for that request), in the bytes jansson gives them: json_dumps(..., JSON_COMPACT |
 * JSON_REAL_PRECISION(6)). tests/test_viz.c compares both, value by value and whole texts. */
#include "viz-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jansson's real at precision 6 the slow way: "%.6g", then ".0" when the text has neither '.'
 * nor 'e', and the exponent without '+' and leading zeros ("1e-05" -> "1e-5"). */
static size_t real6_printf(char *out, double x) {
    if (!isfinite(x)) { /* jansson has no such real: JSON's null */
        memcpy(out, "null", 5);
        return 4;
    }
    char t[VIZ_REAL6_MAX + 8];
    int n = snprintf(t, sizeof t - 3, "%.6g", x);
    if (n < 0 || n >= (int)sizeof t - 3) n = snprintf(t, sizeof t, "null"); /* cannot happen */
    char *e = strchr(t, 'e');
    if (!e && !strchr(t, '.')) {
        memcpy(t + n, ".0", 3);
        n += 2;
    } else if (e) {
        char *d = e + 1 + (e[1] == '-'), *z = e + 1 + (e[1] == '+' || e[1] == '-');
        while (*z == '0' && z[1]) z++;
        if (z != d) memmove(d, z, strlen(z) + 1);
        n = (int)strlen(t);
    }
    memcpy(out, t, (size_t)n + 1);
    return (size_t)n;
}

/* Powers of ten, exact up to 1e22. */
static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                             1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                             1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29,
                             1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36, 1e37};

/* The same text without printf for |x| in [1e-30, 1e30): the six significant digits from
 * |x| · 10^(5 − e) (within ~1e-9 of the exact decimal value), given to printf when that lies
 * within 1e-6 of a rounding tie (where half-even on the exact binary value decides). */
size_t viz_real6(char *out, double x) {
    const double ax = fabs(x);
    if (!(ax >= 1e-30 && ax < 1e30)) {
        if (x == 0) {
            memcpy(out, signbit(x) ? "-0.0" : "0.0", signbit(x) ? 5 : 4);
            return signbit(x) ? 4 : 3;
        }
        return real6_printf(out, x);
    }
    int e = (int)floor(log10(ax));
    double y = 0;
    for (int tries = 0; tries < 3; tries++) {
        const int k = 5 - e; /* -24 .. 35 */
        y = k >= 0 ? ax * p10[k] : ax / p10[-k];
        if (y < 99999.5) e--;
        else if (y >= 999999.5) e++;
        else break;
    }
    const double fl = floor(y), frac = y - fl;
    if (!(y >= 99999.5 && y < 999999.5) || fabs(frac - 0.5) < 1e-6) return real6_printf(out, x);
    long d = (long)fl + (frac > 0.5);
    if (d < 100000 || d > 999999) return real6_printf(out, x);
    char dig[6];
    for (int i = 5; i >= 0; i--) dig[i] = (char)('0' + d % 10), d /= 10;
    int nd = 6; /* significant digits after the trailing zeros are dropped */
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    size_t n = 0;
    if (x < 0) out[n++] = '-';
    if (e < -4 || e >= 6) { /* d.ddddde-X */
        out[n++] = dig[0];
        if (nd > 1) {
            out[n++] = '.';
            for (int i = 1; i < nd; i++) out[n++] = dig[i];
        }
        out[n++] = 'e';
        int ue = e;
        if (ue < 0) out[n++] = '-', ue = -ue;
        if (ue >= 10) out[n++] = (char)('0' + ue / 10);
        out[n++] = (char)('0' + ue % 10);
    } else if (e >= 0) { /* e + 1 integer digits, then the rest; ".0" when none */
        for (int i = 0; i <= e; i++) out[n++] = dig[i];
        out[n++] = '.';
        if (nd <= e + 1) out[n++] = '0';
        for (int i = e + 1; i < nd; i++) out[n++] = dig[i];
    } else { /* 0.000ddd */
        out[n++] = '0', out[n++] = '.';
        for (int i = 0; i < -e - 1; i++) out[n++] = '0';
        for (int i = 0; i < nd; i++) out[n++] = dig[i];
    }
    out[n] = '\0';
    return n;
}

attn_status attn_viz_to_json(const attn_viz *v, const char *model, int layer, long max_values,
                             char **out, size_t *len) {
    if (!v || !out || !len) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_to_json: NULL");
    *out = NULL, *len = 0;
    long values = 0;
    for (int i = 0; i < v->n_maps; i++)
        if (layer < 0 || v->maps[i].layer == layer)
            values += (long)v->maps[i].H * v->maps[i].Tq * v->maps[i].Tk;
    if (values > max_values)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "the maps hold %ld probabilities; one answer takes at most %ld: ask for "
                         "one layer",
                         values, max_values);
    viz_sbuf b = {NULL, 0, 0, false};
    /* one allocation for the bound: each value <= 13 bytes and a comma, 4 more per row */
    b.cap = (size_t)values * (VIZ_REAL6_MAX + 1) + 65536;
    if (!(b.p = malloc(b.cap))) b.cap = 0;
    viz_sb_str(&b, "{");
    if (model) {
        viz_sb_str(&b, "\"model\":");
        viz_sb_json_raw(&b, json_string(model));
        viz_sb_str(&b, ",");
    }
    viz_sb_str(&b, "\"tokens\":");
    viz_sb_json_raw(&b, viz_json_strings(v->tokens, v->n_tokens));
    viz_sb_str(&b, ",\"maps\":[");
    bool first = true;
    for (int i = 0; i < v->n_maps && !b.oom; i++) {
        const attn_viz_map *m = &v->maps[i];
        if (layer >= 0 && m->layer != layer) continue;
        char hdr[160];
        snprintf(hdr, sizeof hdr, "%s{\"kind\":\"%s\",\"layer\":%d,\"heads\":%d,\"queries\":%d,\"keys\":%d,\"p\":[",
                 first ? "" : ",", attn_viz_kind_name(m->kind), m->layer, m->H, m->Tq, m->Tk);
        first = false;
        viz_sb_str(&b, hdr);
        char row[4096];
        for (int h = 0; h < m->H; h++) {
            viz_sb_str(&b, h ? ",[" : "[");
            for (int q = 0; q < m->Tq; q++) {
                const float *p = m->p + ((size_t)h * m->Tq + q) * m->Tk;
                size_t r = 0;
                row[r++] = q ? ',' : '[';
                if (q) row[r++] = '[';
                for (int k = 0; k < m->Tk; k++) {
                    if (r + VIZ_REAL6_MAX + 2 > sizeof row) viz_sb_put(&b, row, r), r = 0;
                    if (k) row[r++] = ',';
                    r += viz_real6(row + r, p[k]);
                }
                row[r++] = ']';
                viz_sb_put(&b, row, r);
            }
            viz_sb_str(&b, "]");
        }
        viz_sb_str(&b, "]}");
    }
    viz_sb_str(&b, "]");
    if (v->n_target) {
        viz_sb_str(&b, ",\"target\":");
        viz_sb_json_raw(&b, viz_json_strings(v->target, v->n_target));
    }
    viz_sb_str(&b, "}");
    if (b.oom) {
        free(b.p);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention maps as JSON: out of memory");
    }
    *out = b.p, *len = b.n;
    return ATTN_STATUS_OK;
}

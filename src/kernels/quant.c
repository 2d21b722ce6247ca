/* quant.c — the quantized weight types of attn_quant.h: their sizes and names, half-precision
 * conversions, dequantization and quantization of every block format, and the validating entry
 * points of the products (quant_ref.c, quant_simd.c compute them).
 *
 * Exactness. Dequantization must equal the gguf Python package's float32 arithmetic bit for bit,
 * and quantization its codes byte for byte, so every expression here is evaluated as written: this
 * file is compiled without FMA instructions and in ISO C mode (GCC: -ffp-contract=off), and the
 * pragma below keeps clang from contracting a·b + c either. Each multiply-add is also spelled as
 * two statements where the order matters. */
#pragma STDC FP_CONTRACT OFF

#include "quant-impl.h"

#include <ctype.h>
#include <float.h>
#include <math.h>

typedef struct {
    attn_qtype type;
    const char *name;
    int elems;
    int bytes;
} qtype_info;

static const qtype_info k_types[] = {
    {ATTN_QTYPE_F32, "f32", 1, 4},         {ATTN_QTYPE_F16, "f16", 1, 2},
    {ATTN_QTYPE_BF16, "bf16", 1, 2},       {ATTN_QTYPE_Q8_0, "q8_0", 32, 34},
    {ATTN_QTYPE_Q4_0, "q4_0", 32, 18},     {ATTN_QTYPE_Q4_1, "q4_1", 32, 20},
    {ATTN_QTYPE_Q5_0, "q5_0", 32, 22},     {ATTN_QTYPE_Q5_1, "q5_1", 32, 24},
    {ATTN_QTYPE_Q4_K, "q4_K", 256, 144},   {ATTN_QTYPE_Q5_K, "q5_K", 256, 176},
    {ATTN_QTYPE_Q6_K, "q6_K", 256, 210},
};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

static const qtype_info *info(uint32_t id) {
    for (int i = 0; i < N_TYPES; i++)
        if ((uint32_t)k_types[i].type == id) return &k_types[i];
    return NULL;
}

bool attn_quant_type_known(uint32_t id) { return info(id) != NULL; }

const char *attn_quant_type_name(attn_qtype t) {
    if (t == ATTN_QTYPE_I8) return "i8";
    const qtype_info *q = info((uint32_t)t);
    return q ? q->name : "?";
}

attn_status attn_quant_type_parse(const char *name, attn_qtype *out) {
    if (!name || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "quant type: NULL argument");
    for (int i = 0; i < N_TYPES; i++) {
        const char *a = name, *b = k_types[i].name;
        while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
        if (!*a && !*b) {
            *out = k_types[i].type;
            return ATTN_STATUS_OK;
        }
    }
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "unknown quantized type '%s' (expected f32, f16, bf16, q8_0, q4_0, q4_1, "
                     "q5_0, q5_1, q4_K, q5_K or q6_K)",
                     name);
}

int attn_quant_block_elems(attn_qtype t) {
    const qtype_info *q = info((uint32_t)t);
    return q ? q->elems : 0;
}

size_t attn_quant_block_bytes(attn_qtype t) {
    const qtype_info *q = info((uint32_t)t);
    return q ? (size_t)q->bytes : 0;
}

attn_status attn_quant_row_bytes(attn_qtype t, int64_t n, size_t *bytes) {
    const qtype_info *q = info((uint32_t)t);
    if (!bytes) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "quant row bytes: NULL argument");
    if (!q) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "unknown quantized type %d", (int)t);
    if (n < 0 || n % q->elems)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "%s: a row of %lld elements is not a multiple of the block of %d",
                         q->name, (long long)n, q->elems);
    if ((uint64_t)(n / q->elems) > SIZE_MAX / (size_t)q->bytes)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: a row of %lld elements is too large",
                         q->name, (long long)n);
    *bytes = (size_t)(n / q->elems) * (size_t)q->bytes;
    return ATTN_STATUS_OK;
}

/* ---- half precision -------------------------------------------------------------------------- */

float attn_quant_f16_to_f32(uint16_t h) { return q_f16(h); }

uint16_t attn_quant_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) { /* inf; NaN keeps the top of its payload, and stays a NaN */
        if (a == 0x7f800000u) return sign | 0x7c00u;
        uint16_t r = (uint16_t)(0x7c00u | (a & 0x7fffffu) >> 13);
        return sign | (r == 0x7c00u ? 0x7c01u : r);
    }
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to 65520 or beyond: inf */
    uint32_t h, rem, half;
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half (or zero), in units of 2^-24 */
        const uint32_t e = a >> 23;
        if (e < 102) return sign; /* below 2^-25 */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14 .. 24 */
        h = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    } else {
        h = ((a >> 23) - 112) << 10 | (a & 0x7fffffu) >> 13;
        rem = a & 0x1fffu;
        half = 0x1000u;
    }
    if (rem > half || (rem == half && (h & 1u))) h++; /* to nearest, ties to even; carries */
    return sign | (uint16_t)h;
}

void attn_quant_f32_to_f16_n(size_t n, const float *src, uint16_t *dst, float *back) {
    const attn_backend be = attn_get_backend();
    if (be == ATTN_BACKEND_AVX512) {
        attn_quant_f16_round_avx512(n, src, dst, back);
    } else if (be == ATTN_BACKEND_AVX2) {
        attn_quant_f16_round_avx2(n, src, dst, back);
    } else {
        for (size_t i = 0; i < n; i++) q_f16_round_at(src, dst, back, i);
    }
}

/* float32 -> bfloat16 as gguf.quants.BF16 (and ggml): NaN forced quiet, else round to nearest
 * even on the dropped 16 bits (subnormals kept, unlike VCVTNEPS2BF16). */
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) u = (u & 0xffff0000u) | 0x00400000u;
    return (uint16_t)(((uint64_t)u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- dequantization -------------------------------------------------------------------------- */

/* x = d·q + m, the product rounded first (gguf: (d * qs) + m). */
static inline float q_affine(float d, float q, float m) {
    const float p = d * q;
    return p + m;
}

void attn_quant_block_dequant(attn_qtype t, const uint8_t *b, float *y) {
    switch (t) {
    case ATTN_QTYPE_F32: memcpy(y, b, sizeof(float)); return;
    case ATTN_QTYPE_F16: y[0] = q_f16_at(b); return;
    case ATTN_QTYPE_BF16: y[0] = bf16_to_f32(q_rd16(b)); return;
    case ATTN_QTYPE_Q8_0: {
        const float d = q_f16_at(b);
        for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)b[Q8_0_QS + i] * d;
        return;
    }
    case ATTN_QTYPE_Q4_0: {
        const float d = q_f16_at(b);
        const uint8_t *qs = b + Q4_0_QS;
        for (int i = 0; i < 16; i++) {
            y[i] = d * (float)((qs[i] & 15) - 8);
            y[i + 16] = d * (float)((qs[i] >> 4) - 8);
        }
        return;
    }
    case ATTN_QTYPE_Q4_1: {
        const float d = q_f16_at(b), m = q_f16_at(b + Q4_1_M);
        const uint8_t *qs = b + Q4_1_QS;
        for (int i = 0; i < 16; i++) {
            y[i] = q_affine(d, (float)(qs[i] & 15), m);
            y[i + 16] = q_affine(d, (float)(qs[i] >> 4), m);
        }
        return;
    }
    case ATTN_QTYPE_Q5_0: {
        const float d = q_f16_at(b);
        const uint32_t qh = q_rd32(b + Q5_0_QH);
        const uint8_t *qs = b + Q5_0_QS;
        for (int i = 0; i < 16; i++) {
            const int lo = (qs[i] & 15) | (int)((qh >> i) & 1u) << 4;
            const int hi = (qs[i] >> 4) | (int)((qh >> (i + 16)) & 1u) << 4;
            y[i] = d * (float)(lo - 16);
            y[i + 16] = d * (float)(hi - 16);
        }
        return;
    }
    case ATTN_QTYPE_Q5_1: {
        const float d = q_f16_at(b), m = q_f16_at(b + Q5_1_M);
        const uint32_t qh = q_rd32(b + Q5_1_QH);
        const uint8_t *qs = b + Q5_1_QS;
        for (int i = 0; i < 16; i++) {
            const int lo = (qs[i] & 15) | (int)((qh >> i) & 1u) << 4;
            const int hi = (qs[i] >> 4) | (int)((qh >> (i + 16)) & 1u) << 4;
            y[i] = q_affine(d, (float)lo, m);
            y[i + 16] = q_affine(d, (float)hi, m);
        }
        return;
    }
    case ATTN_QTYPE_Q4_K:
    case ATTN_QTYPE_Q5_K: {
        const bool five = t == ATTN_QTYPE_Q5_K;
        const float d = q_f16_at(b), dmin = q_f16_at(b + QK4_DMIN);
        const uint8_t *sc = b + QK4_SC, *qh = b + Q5_K_QH;
        const uint8_t *qs = b + (five ? Q5_K_QS : Q4_K_QS);
        for (int j = 0; j < 8; j++) {
            int s, m;
            q_k4_scale_min(j, sc, &s, &m);
            const float ds = d * (float)s, dm = dmin * (float)m;
            const uint8_t *q = qs + 32 * (j / 2);
            const int shift = (j & 1) * 4;
            for (int l = 0; l < 32; l++) {
                int v = (q[l] >> shift) & 15;
                if (five) v |= ((qh[l] >> j) & 1) << 4;
                const float p = ds * (float)v;
                y[32 * j + l] = p - dm;
            }
        }
        return;
    }
    case ATTN_QTYPE_Q6_K: {
        const float d = q_f16_at(b + Q6_K_D);
        const int8_t *sc = (const int8_t *)(b + Q6_K_SC);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b + 64 * h, *qh = b + Q6_K_QH + 32 * h;
            float *o = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int q[4] = {
                    (ql[l] & 15) | ((qh[l] >> 0) & 3) << 4,
                    (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4,
                    (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4,
                    (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4,
                };
                for (int r = 0; r < 4; r++) {
                    const int e = 32 * r + l; /* element within the half */
                    const float ds = d * (float)sc[8 * h + e / 16];
                    o[e] = ds * (float)(q[r] - 32);
                }
            }
        }
        return;
    }
    case ATTN_QTYPE_I8: return; /* not a block type (callers check attn_quant_row_bytes first) */
    }
}

/* ---- quantization: the types gguf.quants implements ------------------------------------------ */

/* A float code in [0, hi] as a byte: what NumPy's astype(uint8) then clip(0, hi) gives for the
 * in-range values; NaN and out-of-range values (only from non-finite input) clamp. */
static inline uint8_t q_code(float v, int hi) {
    if (!(v >= 0.0f)) return 0;
    return v >= (float)hi ? (uint8_t)hi : (uint8_t)v;
}

/* Round half away from zero, as an int8 (gguf's np_roundf then astype(int8)). */
static inline int8_t q_round_i8(float v) {
    const float r = roundf(v);
    if (!(r == r)) return 0;
    return r >= 127.0f ? 127 : r <= -128.0f ? -128 : (int8_t)r;
}

static void quant_q8_0(const float *x, uint8_t *b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    q_wr16(b, attn_quant_f32_to_f16(d));
    for (int i = 0; i < 32; i++) b[Q8_0_QS + i] = (uint8_t)q_round_i8(x[i] * id);
}

/* Q4_0 / Q5_0: d = (the element of largest magnitude, first of ties) / −2^(bits−1); the codes
 * trunc(float32(x·id + 2^(bits−1) + 0.5)) with the product and sum in float64 (gguf's emulation
 * of ggml's fused multiply-add rounding), clipped to the code range. */
static void quant_sym(const float *x, int bits, float *d_out, uint8_t *q) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    const float half = (float)(1 << (bits - 1));
    const float d = max / -half, id = d != 0.0f ? 1.0f / d : 0.0f;
    const double off = (double)half + 0.5;
    for (int i = 0; i < 32; i++) {
        const double p = (double)x[i] * (double)id;
        q[i] = q_code(truncf((float)(p + off)), (1 << bits) - 1);
    }
    *d_out = d;
}

/* Q4_1 / Q5_1: d = (max − min) / (2^bits − 1), codes trunc((x − min)·id + 0.5) in float32. */
static void quant_affine(const float *x, int bits, float *d_out, float *m_out, uint8_t *q) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < 32; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
    }
    const float d = (mx - mn) / (float)((1 << bits) - 1), id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; i++) {
        const float t = (x[i] - mn) * id;
        q[i] = q_code(truncf(t + 0.5f), (1 << bits) - 1);
    }
    *d_out = d;
    *m_out = mn;
}

/* Low nibbles of codes 0..15 with high nibbles of codes 16..31, and the fifth bits as a
 * little-endian uint32 (Q5 only). */
static void pack_nibbles(const uint8_t *q, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int i = 0; i < 16; i++) qs[i] = (uint8_t)((q[i] & 15) | (q[i + 16] & 15) << 4);
    for (int i = 0; i < 32; i++) h |= (uint32_t)(q[i] >> 4 & 1) << i;
    if (qh)
        for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

/* ---- quantization: the k-quants (ggml's reference quantizers, strict float32) ---------------- */

#define GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even, for |v| < 2^22: adding 1.5·2^23 leaves the integer in the low
 * mantissa bits. Outside that range (only from non-finite input) the value is garbage but
 * defined; every caller clamps it. */
static inline int nearest_int(float v) {
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Codes L (n) in [0, nmax] with x ≈ scale·L − the_min (returned: scale; *the_min >= 0), chosen by
 * a weighted least-squares search over nstep + 1 candidate scales around nmax/(max − min)
 * (ggml's make_qkx2_quants with squared error). */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        const float wx = w[i] * x[i];
        sum_x += wx;
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        const float t = iscale * (x[i] - min);
        const int l = nearest_int(t);
        L[i] = (uint8_t)ATTN_MAX(0, ATTN_MIN(nmax, l));
        const float sl = scale * (float)L[i];
        const float slm = sl + min;
        const float diff = slm - x[i];
        const float e = diff * diff;
        const float we = w[i] * e;
        best += we;
    }
    for (int is = 0; is <= nstep; is++) {
        const float r = rdelta * (float)is;
        const float num = (rmin + r) + (float)nmax;
        iscale = num / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const float t = iscale * (x[i] - min);
            const int l = ATTN_MAX(0, ATTN_MIN(nmax, nearest_int(t)));
            Laux[i] = (uint8_t)l;
            const float wl = w[i] * (float)l;
            sum_l += wl;
            const float wll = wl * (float)l;
            sum_l2 += wll;
            const float wlx = wl * x[i];
            sum_xl += wlx;
        }
        const float a = sum_w * sum_l2, b = sum_l * sum_l;
        const float D = a - b;
        if (D > 0) {
            const float s1 = sum_w * sum_xl, s2 = sum_x * sum_l;
            float this_scale = (s1 - s2) / D;
            const float m1 = sum_l2 * sum_x, m2 = sum_l * sum_xl;
            float this_min = (m1 - m2) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur = 0;
            for (int i = 0; i < n; i++) {
                const float sl = this_scale * (float)Laux[i];
                const float slm = sl + this_min;
                const float diff = slm - x[i];
                const float e = diff * diff;
                const float we = w[i] * e;
                cur += we;
            }
            if (cur < best) {
                memcpy(L, Laux, (size_t)n);
                best = cur;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Signed codes L (n) in [0, 2·nmax) (stored + nmax) with x ≈ scale·(L − nmax): the scale from the
 * element of largest magnitude, refined over 18 nearby candidates by the x²-weighted error
 * (ggml's make_qx_quants with rmse_type 1). */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -(float)nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = ATTN_MAX(-nmax, ATTN_MIN(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        const float wx = w * x[i];
        const float wxl = wx * (float)l;
        sumlx += wxl;
        const float wl = w * (float)l;
        const float wll = wl * (float)l;
        suml2 += wll;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float r = 0.1f * (float)is;
        const float num = (float)nmax + r;
        iscale = -num / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = ATTN_MAX(-nmax, ATTN_MIN(nmax - 1, nearest_int(iscale * x[i])));
            const float w = x[i] * x[i];
            const float wx = w * x[i];
            const float wxl = wx * (float)l;
            sumlx += wxl;
            const float wl = w * (float)l;
            const float wll = wl * (float)l;
            suml2 += wll;
        }
        const float lhs = sumlx * sumlx, rhs = best * suml2;
        if (suml2 > 0 && lhs > rhs) {
            for (int i = 0; i < n; i++) {
                const int l = ATTN_MAX(-nmax, ATTN_MIN(nmax - 1, nearest_int(iscale * x[i])));
                L[i] = (int8_t)(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q4_K (bits 4) and Q5_K (bits 5): per sub-block of 32 a scale and a min (fit_scale_min, weights
 * rms(x) + |x|), both quantized to 6 bits against the block's largest, then the codes recomputed
 * from the stored values. */
static void quant_k45(const float *x, int bits, uint8_t *b) {
    const int nmax = (1 << bits) - 1;
    uint8_t L[QK_K], Laux[32];
    float w[32], scales[8], mins[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) {
            const float sq = xs[l] * xs[l];
            sum_x2 += sq;
        }
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], Laux,
                                  bits == 4 ? -1.0f : -0.5f, 0.1f, bits == 4 ? 20 : 15);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t *sc = b + QK4_SC;
    memset(sc, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ATTN_MIN(63, ls);
        lm = ATTN_MIN(63, lm);
        if (j < 4) {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    q_wr16(b, attn_quant_f32_to_f16(max_scale / 63.0f));
    q_wr16(b + QK4_DMIN, attn_quant_f32_to_f16(max_min / 63.0f));
    const float d0 = q_f16_at(b), dmin0 = q_f16_at(b + QK4_DMIN);
    for (int j = 0; j < 8; j++) {
        int s, m;
        q_k4_scale_min(j, sc, &s, &m);
        const float d = d0 * (float)s;
        if (d == 0.0f) continue;
        const float dm = dmin0 * (float)m;
        for (int l = 0; l < 32; l++) {
            const float t = (x[32 * j + l] + dm) / d;
            L[32 * j + l] = (uint8_t)ATTN_MAX(0, ATTN_MIN(nmax, nearest_int(t)));
        }
    }
    uint8_t *qs = b + (bits == 4 ? Q4_K_QS : Q5_K_QS), *qh = b + Q5_K_QH;
    if (bits == 5) memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((l1 & 15) | (l2 & 15) << 4);
            if (bits == 5)
                qh[l] |= (uint8_t)((l1 >> 4) << (2 * c) | (l2 >> 4) << (2 * c + 1));
        }
}

/* Q6_K: per sub-block of 16 a signed scale (fit_scale_sym), quantized to int8 against the block's
 * largest in magnitude (d = that scale / −128), then the codes recomputed from the stored values. */
static void quant_q6_k(const float *x, uint8_t *b) {
    int8_t L[QK_K];
    float scales[16], max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; j++) {
        scales[j] = fit_scale_sym(16, 32, x + 16 * j, L + 16 * j);
        if (fabsf(scales[j]) > max_abs) {
            max_abs = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    memset(b, 0, 210);
    if (max_abs < GROUP_MAX_EPS) return; /* all codes 0, d = +0 */
    int8_t *sc = (int8_t *)(b + Q6_K_SC);
    const float iscale = -128.0f / max_scale;
    q_wr16(b + Q6_K_D, attn_quant_f32_to_f16(1 / iscale));
    for (int j = 0; j < 16; j++) sc[j] = (int8_t)ATTN_MIN(127, nearest_int(iscale * scales[j]));
    const float d0 = q_f16_at(b + Q6_K_D);
    for (int j = 0; j < 16; j++) {
        const float d = d0 * (float)sc[j];
        if (d == 0.0f) continue;
        for (int l = 0; l < 16; l++) {
            const int q = nearest_int(x[16 * j + l] / d);
            L[16 * j + l] = (int8_t)(ATTN_MAX(-32, ATTN_MIN(31, q)) + 32);
        }
    }
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b + 64 * h, *qh = b + Q6_K_QH + 32 * h;
        const int8_t *Lh = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
            ql[l] = (uint8_t)((q1 & 15) | (q3 & 15) << 4);
            ql[l + 32] = (uint8_t)((q2 & 15) | (q4 & 15) << 4);
            qh[l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
        }
    }
}

static void quantize_block(attn_qtype t, const float *x, uint8_t *b) {
    uint8_t q[32];
    float d, m;
    switch (t) {
    case ATTN_QTYPE_F32: memcpy(b, x, sizeof(float)); return;
    case ATTN_QTYPE_F16: q_wr16(b, attn_quant_f32_to_f16(x[0])); return;
    case ATTN_QTYPE_BF16: q_wr16(b, f32_to_bf16(x[0])); return;
    case ATTN_QTYPE_Q8_0: quant_q8_0(x, b); return;
    case ATTN_QTYPE_Q4_0:
        quant_sym(x, 4, &d, q);
        q_wr16(b, attn_quant_f32_to_f16(d));
        pack_nibbles(q, b + Q4_0_QS, NULL);
        return;
    case ATTN_QTYPE_Q5_0:
        quant_sym(x, 5, &d, q);
        q_wr16(b, attn_quant_f32_to_f16(d));
        pack_nibbles(q, b + Q5_0_QS, b + Q5_0_QH);
        return;
    case ATTN_QTYPE_Q4_1:
        quant_affine(x, 4, &d, &m, q);
        q_wr16(b, attn_quant_f32_to_f16(d));
        q_wr16(b + Q4_1_M, attn_quant_f32_to_f16(m));
        pack_nibbles(q, b + Q4_1_QS, NULL);
        return;
    case ATTN_QTYPE_Q5_1:
        quant_affine(x, 5, &d, &m, q);
        q_wr16(b, attn_quant_f32_to_f16(d));
        q_wr16(b + Q5_1_M, attn_quant_f32_to_f16(m));
        pack_nibbles(q, b + Q5_1_QS, b + Q5_1_QH);
        return;
    case ATTN_QTYPE_Q4_K: quant_k45(x, 4, b); return;
    case ATTN_QTYPE_Q5_K: quant_k45(x, 5, b); return;
    case ATTN_QTYPE_Q6_K: quant_q6_k(x, b); return;
    case ATTN_QTYPE_I8: return; /* not a block type (callers check attn_quant_row_bytes first) */
    }
}

/* ---- public conversions ---------------------------------------------------------------------- */

static attn_status check_n(const char *what, attn_qtype t, int64_t n, const void *a,
                           const void *b) {
    size_t bytes;
    ATTN_TRY(attn_quant_row_bytes(t, n, &bytes));
    if (n > 0 && (!a || !b)) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL buffer", what);
    return ATTN_STATUS_OK;
}

attn_status attn_quant_dequantize(attn_qtype t, int64_t n, const void *src, float *dst) {
    ATTN_TRY(check_n("dequantize", t, n, src, dst));
    const int be = attn_quant_block_elems(t);
    const size_t bb = attn_quant_block_bytes(t);
    const uint8_t *s = src;
    for (int64_t i = 0; i < n / be; i++) attn_quant_block_dequant(t, s + (size_t)i * bb, dst + i * be);
    return ATTN_STATUS_OK;
}

attn_status attn_quant_quantize(attn_qtype t, int64_t n, const float *src, void *dst) {
    ATTN_TRY(check_n("quantize", t, n, src, dst));
    const int be = attn_quant_block_elems(t);
    const size_t bb = attn_quant_block_bytes(t);
    uint8_t *d = dst;
    for (int64_t i = 0; i < n / be; i++) quantize_block(t, src + i * be, d + (size_t)i * bb);
    return ATTN_STATUS_OK;
}

/* ---- the products' validation ---------------------------------------------------------------- */

#define REQUIRE(cond, ...)                                                                       \
    do {                                                                                         \
        if (!(cond)) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, __VA_ARGS__);                \
    } while (0)

static attn_status quant_gemm(int M, int N, int K, const float *x, int ldx, attn_qtype t,
                              const void *w, float beta, float *y, int ldy, const float *bias,
                              attn_act act, attn_quant_act qact, bool chunked) {
    REQUIRE(M >= 0 && N >= 0 && K >= 0, "quant gemm: sizes must be >= 0 (M=%d N=%d K=%d)", M, N,
            K);
    REQUIRE(act >= ATTN_ACT_NONE && act <= ATTN_ACT_SILU, "quant gemm: unknown activation %d",
            (int)act);
    REQUIRE(qact == ATTN_QUANT_ACT_F32 || qact == ATTN_QUANT_ACT_Q8 ||
                qact == ATTN_QUANT_ACT_Q8_ALL,
            "quant gemm: unknown activation mode %d", (int)qact);
    size_t rb;
    ATTN_TRY(attn_quant_row_bytes(t, K, &rb));
    REQUIRE(ldx >= ATTN_MAX(1, K), "quant gemm: ldx=%d < K=%d", ldx, K);
    REQUIRE(ldy >= ATTN_MAX(1, N), "quant gemm: ldy=%d < N=%d", ldy, N);
    if ((size_t)N > 0 && rb > ATTN_MAX_BUFFER_BYTES / (size_t)N)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "quant gemm: W (%d, %d) is too large", N, K);
    if (M == 0 || N == 0) return ATTN_STATUS_OK;
    REQUIRE(y && (K == 0 || (x && w)), "quant gemm: NULL matrix");
    attn_kernels_count(M, N, K);
    const attn_backend be = attn_get_backend();
    if (be == ATTN_BACKEND_AVX512)
        attn_quant_gemm_avx512(M, N, K, x, ldx, t, w, rb, beta, y, ldy, bias, act, qact,
                               chunked);
    else if (be == ATTN_BACKEND_AVX2)
        attn_quant_gemm_avx2(M, N, K, x, ldx, t, w, rb, beta, y, ldy, bias, act, qact, chunked);
    else
        attn_quant_gemm_ref(M, N, K, x, ldx, t, w, rb, beta, y, ldy, bias, act, qact);
    return ATTN_STATUS_OK;
}

attn_status attn_quant_gemm(int M, int N, int K, const float *x, int ldx, attn_qtype t,
                            const void *w, float beta, float *y, int ldy, const float *bias,
                            attn_act act, attn_quant_act qact) {
    return quant_gemm(M, N, K, x, ldx, t, w, beta, y, ldy, bias, act, qact, false);
}

attn_status attn_quant_gemm_batch(int M, int N, int K, const float *x, int ldx, attn_qtype t,
                                  const void *w, float beta, float *y, int ldy, const float *bias,
                                  attn_act act, attn_quant_act qact) {
    return quant_gemm(M, N, K, x, ldx, t, w, beta, y, ldy, bias, act, qact, true);
}

/* ---- the x8 layout ---------------------------------------------------------------------------- */

bool attn_quant_pack_supported(attn_qtype t) { return qx8_group_bytes(t) != 0; }

attn_status attn_quant_pack(attn_qtype t, int N, int K, const void *w, attn_quant_packed *out) {
    REQUIRE(out, "quant pack: NULL argument");
    memset(out, 0, sizeof *out);
    REQUIRE(attn_quant_pack_supported(t), "quant pack: %s weights are not packed (q8_0, q4_0 and "
            "q4_1 are)", attn_quant_type_name(t));
    REQUIRE(N >= 0 && K >= 0 && K % 32 == 0, "quant pack: need N >= 0 and K a multiple of 32 "
            "(N=%d K=%d)", N, K);
    size_t rb;
    ATTN_TRY(attn_quant_row_bytes(t, K, &rb));
    if ((size_t)N > 0 && rb > ATTN_MAX_BUFFER_BYTES / (size_t)N)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "quant pack: W (%d, %d) is too large", N, K);
    REQUIRE(w || N == 0 || K == 0, "quant pack: NULL weights");
    const size_t bytes = (size_t)N * rb, S = qx8_group_bytes(t), bb = attn_quant_block_bytes(t);
    uint8_t *d = attn_alloc(bytes ? bytes : 1);
    if (!d) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "quant pack: out of memory for %zu bytes",
                             bytes);
    const int N8 = N - N % 8, G = K / 32, chunks = t == ATTN_QTYPE_Q8_0 ? 8 : 4;
    const size_t qs = t == ATTN_QTYPE_Q4_1 ? 4 : 2, co = qx8_codes_off(t);
    const uint8_t *src = w;
    for (int p = 0; p < N8 / 8; p++)
        for (int g = 0; g < G; g++) {
            uint8_t *pg = d + ((size_t)p * (size_t)G + (size_t)g) * S;
            for (int r = 0; r < 8; r++) {
                const uint8_t *blk = src + (size_t)(8 * p + r) * rb + (size_t)g * bb;
                memcpy(pg + 2 * r, blk, 2);
                if (t == ATTN_QTYPE_Q4_1) memcpy(pg + 16 + 2 * r, blk + 2, 2);
                for (int c = 0; c < chunks; c++) memcpy(pg + co + 32 * c + 4 * r, blk + qs + 4 * c, 4);
            }
        }
    if (N > N8) memcpy(d + (size_t)N8 * rb, src + (size_t)N8 * rb, (size_t)(N - N8) * rb);
    out->type = t, out->N = N, out->K = K, out->bytes = bytes, out->data = d;
    return ATTN_STATUS_OK;
}

attn_status attn_quant_pack_sums(attn_quant_packed *P) {
    REQUIRE(P && (P->data || P->N == 0 || P->K == 0), "quant pack sums: not a packed matrix");
    if (P->type != ATTN_QTYPE_Q8_0 || P->nsum) return ATTN_STATUS_OK;
    const int np = P->N / 8, G = P->K / 32;
    const size_t S = qx8_group_bytes(ATTN_QTYPE_Q8_0), co = qx8_codes_off(ATTN_QTYPE_Q8_0);
    int32_t *ns = attn_alloc(((size_t)np * (size_t)G * 8 + 1) * sizeof *ns);
    if (!ns) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "quant pack sums: out of memory");
    for (int p = 0; p < np; p++)
        for (int g = 0; g < G; g++) {
            const int8_t *pg = (const int8_t *)P->data + ((size_t)p * (size_t)G + (size_t)g) * S + co;
            for (int r = 0; r < 8; r++) { /* row r's codes: 4 bytes at 4r of each 32-byte chunk */
                int32_t sum = 0;
                for (int c = 0; c < 8; c++)
                    for (int b = 0; b < 4; b++) sum += pg[32 * c + 4 * r + b];
                ns[((size_t)p * (size_t)G + (size_t)g) * 8 + (size_t)r] = -128 * sum;
            }
        }
    P->nsum = ns;
    return ATTN_STATUS_OK;
}

void attn_quant_packed_free(attn_quant_packed *p) {
    if (!p) return;
    attn_free(p->nsum);
    attn_free(p->scale);
    attn_free(p->data);
    memset(p, 0, sizeof *p);
}

/* An i8 matrix (attn_quant_pack_i8's fields consistent). */
static attn_status check_i8(const char *what, const attn_quant_packed *P) {
    REQUIRE(P->data && P->scale && P->nsum && P->N >= 0 && P->K >= 4 && P->K <= 65536 &&
                P->K % 4 == 0 && P->bytes == ((size_t)P->N + 15) / 16 * 16 * (size_t)P->K,
            "%s: not a packed i8 matrix", what);
    return ATTN_STATUS_OK;
}

static attn_status check_packed(const char *what, const attn_quant_packed *P, size_t *rb) {
    REQUIRE(P && P->data && attn_quant_pack_supported(P->type) && P->N >= 0 && P->K >= 0 &&
                P->K % 32 == 0,
            "%s: not a packed matrix", what);
    ATTN_TRY(attn_quant_row_bytes(P->type, P->K, rb));
    REQUIRE(P->bytes == (size_t)P->N * *rb, "%s: packed matrix of %zu bytes, not %d rows of %zu",
            what, P->bytes, P->N, *rb);
    return ATTN_STATUS_OK;
}

/* Row n of a packed W, block by block: each block in the row layout handed to fn (its index g),
 * the row's bytes when it lies past the panels (g = -1). */
static attn_status packed_row_blocks(const attn_quant_packed *P, int n, const void *out,
                                     void (*fn)(const attn_quant_packed *, int g,
                                                const uint8_t *blk, size_t bytes, void *out),
                                     void *ctx) {
    size_t rb;
    ATTN_TRY(check_packed("quant packed row", P, &rb));
    REQUIRE(out && n >= 0 && n < P->N, "quant packed row: row %d of %d", n, P->N);
    if (n >= P->N - P->N % 8) {
        fn(P, -1, (const uint8_t *)P->data + (size_t)n * rb, rb, ctx);
        return ATTN_STATUS_OK;
    }
    uint8_t blk[34];
    for (int g = 0; g < P->K / 32; g++) {
        qx8_block(P, n, g, blk);
        fn(P, g, blk, attn_quant_block_bytes(P->type), ctx);
    }
    return ATTN_STATUS_OK;
}

static void copy_block(const attn_quant_packed *P, int g, const uint8_t *blk, size_t bytes,
                       void *out) {
    memcpy((uint8_t *)out + (g < 0 ? 0 : (size_t)g * bytes), blk, bytes);
    (void)P;
}

static void dequant_block(const attn_quant_packed *P, int g, const uint8_t *blk, size_t bytes,
                          void *out) {
    (void)bytes;
    if (g < 0)
        (void)attn_quant_dequantize(P->type, P->K, blk, out);
    else
        attn_quant_block_dequant(P->type, blk, (float *)out + 32 * g);
}

attn_status attn_quant_packed_row(const attn_quant_packed *P, int n, void *row) {
    REQUIRE(!P || P->type != ATTN_QTYPE_I8, "quant packed row: an i8 matrix has no row layout");
    return packed_row_blocks(P, n, row, copy_block, row);
}

attn_status attn_quant_packed_dequant_row(const attn_quant_packed *P, int n, float *out) {
    if (P && P->type == ATTN_QTYPE_I8) {
        ATTN_TRY(check_i8("quant packed row", P));
        REQUIRE(out && n >= 0 && n < P->N, "quant packed row: row %d of %d", n, P->N);
        return attn_quant_i8_dequant_row(P, n, out);
    }
    return packed_row_blocks(P, n, out, dequant_block, out);
}

/* The ref backend on packed weights: each row back in the row layout, then attn_quant_gemm_ref
 * on it as one output column. */
static attn_status gemm_packed_ref(int M, const float *x, int ldx, const attn_quant_packed *P,
                                   size_t rb, float beta, float *y, int ldy, const float *bias,
                                   attn_act act, attn_quant_act qact) {
    uint8_t *row = attn_alloc(rb ? rb : 1);
    if (!row) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "quant gemm: out of memory");
    for (int n = 0; n < P->N; n++) {
        (void)attn_quant_packed_row(P, n, row);
        attn_quant_gemm_ref(M, 1, P->K, x, ldx, P->type, row, rb, beta, y + n, ldy,
                            bias ? bias + n : NULL, act, qact);
    }
    attn_free(row);
    return ATTN_STATUS_OK;
}

static attn_status quant_gemm_packed(int M, const float *x, int ldx, const attn_quant_packed *P,
                                     float beta, float *y, int ldy, const float *bias,
                                     attn_act act, attn_quant_act qact, bool chunked) {
    size_t rb = 0;
    const bool i8 = P && P->type == ATTN_QTYPE_I8;
    if (i8)
        ATTN_TRY(check_i8("quant gemm", P));
    else
        ATTN_TRY(check_packed("quant gemm", P, &rb));
    const int N = P->N, K = P->K;
    REQUIRE(M >= 0, "quant gemm: M must be >= 0 (M=%d)", M);
    REQUIRE(act >= ATTN_ACT_NONE && act <= ATTN_ACT_SILU, "quant gemm: unknown activation %d",
            (int)act);
    REQUIRE(qact == ATTN_QUANT_ACT_F32 || qact == ATTN_QUANT_ACT_Q8 ||
                qact == ATTN_QUANT_ACT_Q8_ALL,
            "quant gemm: unknown activation mode %d", (int)qact);
    REQUIRE(ldx >= ATTN_MAX(1, K), "quant gemm: ldx=%d < K=%d", ldx, K);
    REQUIRE(ldy >= ATTN_MAX(1, N), "quant gemm: ldy=%d < N=%d", ldy, N);
    if (M == 0 || N == 0) return ATTN_STATUS_OK;
    REQUIRE(y && (K == 0 || x), "quant gemm: NULL matrix");
    attn_kernels_count(M, N, K);
    const attn_backend be = attn_get_backend();
    bool ok = true;
    if (i8) /* one path for every M and every backend (chunked or not: rows are independent) */
        ok = attn_quant_i8_gemm(M, x, ldx, P, beta, y, ldy, bias, act);
    else if (be == ATTN_BACKEND_AVX512)
        ok = attn_quant_gemm_x8_avx512(M, x, ldx, P, beta, y, ldy, bias, act, qact, chunked);
    else if (be == ATTN_BACKEND_AVX2)
        ok = attn_quant_gemm_x8_avx2(M, x, ldx, P, beta, y, ldy, bias, act, qact, chunked);
    else
        return gemm_packed_ref(M, x, ldx, P, rb, beta, y, ldy, bias, act, qact);
    return ok ? ATTN_STATUS_OK
              : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "quant gemm: out of memory for (%d, %d, %d)",
                          M, N, K);
}

attn_status attn_quant_gemm_packed(int M, const float *x, int ldx, const attn_quant_packed *P,
                                   float beta, float *y, int ldy, const float *bias,
                                   attn_act act, attn_quant_act qact) {
    return quant_gemm_packed(M, x, ldx, P, beta, y, ldy, bias, act, qact, false);
}

attn_status attn_quant_gemm_packed_batch(int M, const float *x, int ldx,
                                         const attn_quant_packed *P, float beta, float *y,
                                         int ldy, const float *bias, attn_act act,
                                         attn_quant_act qact) {
    return quant_gemm_packed(M, x, ldx, P, beta, y, ldy, bias, act, qact, true);
}

attn_status attn_quant_embedding_forward(int n_ids, int V, int C, const int32_t *ids,
                                         attn_qtype t, const void *table, float *out) {
    REQUIRE(n_ids >= 0 && V > 0 && C >= 0, "quant embedding: need n_ids >= 0, V > 0, C >= 0");
    size_t rb;
    ATTN_TRY(attn_quant_row_bytes(t, C, &rb));
    if (n_ids == 0 || C == 0) return ATTN_STATUS_OK;
    REQUIRE(ids && table && out, "quant embedding: NULL argument");
    for (int i = 0; i < n_ids; i++)
        REQUIRE(ids[i] >= 0 && ids[i] < V, "quant embedding: id %d at %d is outside [0, %d)",
                (int)ids[i], i, V);
    for (int i = 0; i < n_ids; i++)
        attn_quant_dequantize(t, C, (const uint8_t *)table + (size_t)ids[i] * rb,
                              out + (size_t)i * C);
    return ATTN_STATUS_OK;
}

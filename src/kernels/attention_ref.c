/* attention_ref.c — reference scaled-dot-product attention, forward and backward: plain loops over
 * one query (or key) at a time, single-threaded, double-precision accumulation. Slow but easy to
 * audit; the optimized kernels (attention_simd.c) and PyTorch are checked against it.
 *
 * No heap: scores are recomputed instead of stored (forward: a pass for the row maximum, a pass
 * for the softmax-weighted sum of V; backward: one sweep over queries for dQ, one over keys for
 * dK and dV), and the D-wide double accumulators are a fixed stack array, walked in chunks when
 * D exceeds it. Visibility follows attn_kernels.h: key j is visible to query i iff
 * (!causal || j <= i + causal_offset) && j < kv_len[b] (Tk without kv_len) && (window == 0 ||
 * i + causal_offset − j < window): a range [lo, hi) of keys per query.
 *
 * Grouped-query attention: query head h reads K/V head h / (H / H_kv); the backward's key sweep
 * runs per K/V head and sums over the query heads of its group. A score bias (which may hold
 * -inf) is added to the scaled score; a row whose visible scores are all -inf is treated exactly
 * like a row with no visible key (o = 0, lse = -inf, probabilities 0, no gradient). */
#include "kernels-impl.h"

#include <math.h>
#include <string.h>

#define CHUNK 256 /* doubles per accumulator chunk */

/* The parameters with their defaults resolved: H_kv, batch strides. */
typedef struct {
    int hkv, grp;                /* K/V heads; query heads per K/V head */
    ptrdiff_t sbq, sbk, sbv, sbo; /* batch strides in floats */
} geom;

static geom make_geom(const attn_attention_params *p) {
    geom g;
    g.hkv = p->H_kv ? p->H_kv : p->H;
    g.grp = p->H / g.hkv;
    g.sbq = p->sbq ? p->sbq : (ptrdiff_t)p->Tq * p->ldq;
    g.sbk = p->sbk ? p->sbk : (ptrdiff_t)p->Tk * p->ldk;
    g.sbv = p->sbv ? p->sbv : (ptrdiff_t)p->Tk * p->ldv;
    g.sbo = p->sbo ? p->sbo : (ptrdiff_t)p->Tq * p->ldo;
    return g;
}

/* The keys visible to query i of batch b: [*lo, return value) (empty when lo >= hi). */
static int visible(const attn_attention_params *p, int b, int i, int *lo) {
    long n = p->kv_len ? p->kv_len[b] : p->Tk;
    if (p->causal && (long)i + p->causal_offset + 1 < n) n = (long)i + p->causal_offset + 1;
    const long l = p->window > 0 ? (long)i + p->causal_offset - p->window + 1 : 0;
    *lo = l < 0 ? 0 : l > n ? (int)ATTN_MAX(n, 0) : (int)l;
    return n < 0 ? 0 : (int)n;
}

static double dot(const float *a, const float *b, int n) {
    double s = 0;
    for (int d = 0; d < n; d++) s += (double)a[d] * b[d];
    return s;
}

/* Pointer to element (b, t, h, 0) of a (B, T, heads, D) tensor with batch stride sb, row stride
 * ld. */
#define ROW(base, b, sb, t, ld, h, D)                                                            \
    ((base) + (ptrdiff_t)(b) * (sb) + (ptrdiff_t)(t) * (ld) + (ptrdiff_t)(h) * (D))

/* Bias row (b, h, i): entry j at [j]; NULL without a bias. */
static const float *bias_row(const attn_attention_params *p, int b, int h, int i) {
    if (!p->bias) return NULL;
    return p->bias + (ptrdiff_t)b * p->bias_sb + (ptrdiff_t)h * p->bias_sh +
           (ptrdiff_t)i * p->bias_sq;
}

/* The score of query qi and key kj: scale·q·k (+ bias[j]). */
static double score(const attn_attention_params *p, const float *qi, const float *kj,
                    const float *brow, int j) {
    double s = p->scale * dot(qi, kj, p->D);
    if (brow) s += brow[j];
    return s;
}

void attn_attention_forward_ref(const attn_attention_params *p,
                                const float *q,  // (B, Tq, H, D) row stride ldq, batch sbq
                                const float *k,  // (B, Tk, H_kv, D) row stride ldk, batch sbk
                                const float *v,  // (B, Tk, H_kv, D) row stride ldv, batch sbv
                                float *o,        // (B, Tq, H, D) row stride ldo, batch sbo
                                float *lse,      // (B, H, Tq) or NULL
                                float *probs) {  // (B, H, Tq, Tk) or NULL
    const int D = p->D;
    const geom G = make_geom(p);
    double acc[CHUNK];
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->H; h++) {
            const int g = h / G.grp;
            for (int i = 0; i < p->Tq; i++) {
                const float *qi = ROW(q, b, G.sbq, i, p->ldq, h, D);
                float *oi = ROW(o, b, G.sbo, i, p->ldo, h, D);
                const float *brow = bias_row(p, b, h, i);
                const size_t row = ((size_t)b * p->H + h) * p->Tq + i;
                int lo;
                int n = visible(p, b, i, &lo);
                /* Pass 1: the row maximum of the scaled scores. A row whose visible scores are
                 * all -inf (bias) has no visible key (NaN scores keep it alive, to show up). */
                double m = -INFINITY;
                bool nan = false;
                for (int j = lo; j < n; j++) {
                    double s = score(p, qi, ROW(k, b, G.sbk, j, p->ldk, g, D), brow, j);
                    if (s > m) m = s;
                    nan |= s != s;
                }
                if (m == -INFINITY && !nan) n = 0;
                /* Pass 2, per chunk of D: l = Σ e^(s−m), o = Σ e^(s−m) v / l. */
                double l = 0;
                for (int d0 = 0; d0 < D; d0 += CHUNK) { /* D >= 1: runs at least once */
                    const int dn = D - d0 < CHUNK ? D - d0 : CHUNK;
                    memset(acc, 0, sizeof acc);
                    l = 0;
                    for (int j = lo; j < n; j++) {
                        double e =
                            exp(score(p, qi, ROW(k, b, G.sbk, j, p->ldk, g, D), brow, j) - m);
                        const float *vj = ROW(v, b, G.sbv, j, p->ldv, g, D) + d0;
                        l += e;
                        for (int d = 0; d < dn; d++) acc[d] += e * vj[d];
                    }
                    for (int d = 0; d < dn; d++) oi[d0 + d] = n ? (float)(acc[d] / l) : 0.0f;
                }
                const double lse_i = n ? m + log(l) : -INFINITY;
                if (lse) lse[row] = (float)lse_i;
                if (probs) {
                    float *pr = probs + row * p->Tk;
                    for (int j = 0; j < p->Tk; j++)
                        pr[j] = j >= lo && j < n
                                    ? (float)exp(score(p, qi, ROW(k, b, G.sbk, j, p->ldk, g, D),
                                                       brow, j) -
                                                 lse_i)
                                    : 0.0f;
                }
            }
        }
}

/* The backward's per-pair quantities, recomputed on demand: p_ij = e^(s_ij − lse_i) and
 * ds_ij = p_ij (dO_i·v_j − D_i), where D_i = dO_i·O_i (ds is d loss / d s, before the scale). */
static void pair(const attn_attention_params *p, const float *qi, const float *kj,
                 const float *vj, const float *doi, const float *brow, int j, double lse_i,
                 double di, double *pij, double *dsij) {
    *pij = exp(score(p, qi, kj, brow, j) - lse_i);
    *dsij = *pij * (dot(doi, vj, p->D) - di);
}

/* Keys visible to query i given its lse, [*lo, return value): none for a row without a visible
 * key (lse = -inf, possibly because the bias hides every visible key). */
static int alive_visible(const attn_attention_params *p, int b, int i, float lse_i, int *lo) {
    const int n = visible(p, b, i, lo);
    return lse_i > -INFINITY ? n : 0;
}

void attn_attention_backward_ref(const attn_attention_params *p,
                                 const float *q,   // (B, Tq, H, D) row stride ldq, batch sbq
                                 const float *k,   // (B, Tk, H_kv, D) row stride ldk, batch sbk
                                 const float *v,   // (B, Tk, H_kv, D) row stride ldv, batch sbv
                                 const float *o,   // (B, Tq, H, D) row stride ldo, batch sbo
                                 const float *lse, // (B, H, Tq)
                                 const float *do_, // (B, Tq, H, D) row stride ldo, batch sbo
                                 float *dq,        // (B, Tq, H, D) row stride ldq, batch sbq
                                 float *dk,        // (B, Tk, H_kv, D) row stride ldk, batch sbk
                                 float *dv) {      // (B, Tk, H_kv, D) row stride ldv, batch sbv
    const int D = p->D;
    const geom G = make_geom(p);
    double acc[CHUNK], acc2[CHUNK];
    for (int b = 0; b < p->B; b++) {
        for (int h = 0; h < p->H; h++) {
            const int g = h / G.grp;
            const float *lseb = lse + ((size_t)b * p->H + h) * p->Tq;
            /* Sweep 1, per query: dQ_i = scale Σ_j ds_ij k_j (and dbias_ij = ds_ij). */
            for (int i = 0; i < p->Tq; i++) {
                const float *qi = ROW(q, b, G.sbq, i, p->ldq, h, D);
                const float *doi = ROW(do_, b, G.sbo, i, p->ldo, h, D);
                const double di = dot(doi, ROW(o, b, G.sbo, i, p->ldo, h, D), D);
                const float *brow = bias_row(p, b, h, i);
                float *dqi = ROW(dq, b, G.sbq, i, p->ldq, h, D);
                float *dbi = p->bias && p->dbias
                                 ? p->dbias + (((size_t)b * p->H + h) * p->Tq + i) * p->Tk
                                 : NULL; /* (Tk) */
                int lo;
                const int n = alive_visible(p, b, i, lseb[i], &lo);
                if (dbi) memset(dbi, 0, sizeof(float) * p->Tk);
                for (int d0 = 0; d0 < D; d0 += CHUNK) {
                    const int dn = D - d0 < CHUNK ? D - d0 : CHUNK;
                    memset(acc, 0, sizeof acc);
                    for (int j = lo; j < n; j++) {
                        const float *kj = ROW(k, b, G.sbk, j, p->ldk, g, D);
                        double pij, ds;
                        pair(p, qi, kj, ROW(v, b, G.sbv, j, p->ldv, g, D), doi, brow, j,
                             lseb[i], di, &pij, &ds);
                        for (int d = 0; d < dn; d++) acc[d] += ds * kj[d0 + d];
                        if (dbi && d0 == 0) dbi[j] = (float)ds;
                    }
                    for (int d = 0; d < dn; d++) dqi[d0 + d] = (float)(p->scale * acc[d]);
                }
            }
        }
        /* Sweep 2, per key of each K/V head g: dK_j = scale Σ_h Σ_i ds_ij q_i,
         * dV_j = Σ_h Σ_i p_ij dO_i, over the query heads h of the group and the queries that
         * see key j. */
        for (int g = 0; g < G.hkv; g++)
            for (int j = 0; j < p->Tk; j++) {
                const float *kj = ROW(k, b, G.sbk, j, p->ldk, g, D);
                const float *vj = ROW(v, b, G.sbv, j, p->ldv, g, D);
                float *dkj = ROW(dk, b, G.sbk, j, p->ldk, g, D);
                float *dvj = ROW(dv, b, G.sbv, j, p->ldv, g, D);
                for (int d0 = 0; d0 < D; d0 += CHUNK) {
                    const int dn = D - d0 < CHUNK ? D - d0 : CHUNK;
                    memset(acc, 0, sizeof acc);
                    memset(acc2, 0, sizeof acc2);
                    for (int h = g * G.grp; h < (g + 1) * G.grp; h++) {
                        const float *lseb = lse + ((size_t)b * p->H + h) * p->Tq;
                        for (int i = 0; i < p->Tq; i++) {
                            int lo;
                            if (j >= alive_visible(p, b, i, lseb[i], &lo) || j < lo) continue;
                            const float *qi = ROW(q, b, G.sbq, i, p->ldq, h, D);
                            const float *doi = ROW(do_, b, G.sbo, i, p->ldo, h, D);
                            const double di = dot(doi, ROW(o, b, G.sbo, i, p->ldo, h, D), D);
                            double pij, ds;
                            pair(p, qi, kj, vj, doi, bias_row(p, b, h, i), j, lseb[i], di, &pij,
                                 &ds);
                            for (int d = 0; d < dn; d++) {
                                acc[d] += ds * qi[d0 + d];
                                acc2[d] += pij * doi[d0 + d];
                            }
                        }
                    }
                    for (int d = 0; d < dn; d++) {
                        dkj[d0 + d] = (float)(p->scale * acc[d]);
                        dvj[d0 + d] = (float)acc2[d];
                    }
                }
            }
    }
}

/* attention_ref.c — reference scaled-dot-product attention, forward and backward: plain loops over
 * one query (or key) at a time, single-threaded, double-precision accumulation. Slow but easy to
 * audit; the optimized kernels (attention_simd.c) and PyTorch are checked against it.
 *
 * No heap: scores are recomputed instead of stored (forward: a pass for the row maximum, a pass
 * for the softmax-weighted sum of V; backward: one sweep over queries for dQ, one over keys for
 * dK and dV), and the D-wide double accumulators are a fixed stack array, walked in chunks when
 * D exceeds it. Visibility follows attn_kernels.h: key j is visible to query i iff
 * (!causal || j <= i + causal_offset) && j < kv_len[b] (Tk without kv_len). */
#include "kernels-impl.h"

#include <math.h>
#include <string.h>

#define CHUNK 256 /* doubles per accumulator chunk */

/* Number of keys visible to query i of batch b: keys [0, n) (the mask is a prefix). */
static int visible(const attn_attention_params *p, int b, int i) {
    long n = p->kv_len ? p->kv_len[b] : p->Tk;
    if (p->causal && (long)i + p->causal_offset + 1 < n) n = (long)i + p->causal_offset + 1;
    return n < 0 ? 0 : (int)n;
}

static double dot(const float *a, const float *b, int n) {
    double s = 0;
    for (int d = 0; d < n; d++) s += (double)a[d] * b[d];
    return s;
}

/* Row pointers of element (b, t, h, 0) of a (B, T, H, D) tensor with row stride ld. */
#define ROW(base, b, T, t, ld, h, D) ((base) + ((size_t)(b) * (T) + (t)) * (ld) + (size_t)(h) * (D))

void attn_attention_forward_ref(const attn_attention_params *p,
                                const float *q,  // (B, Tq, H, D) row stride ldq
                                const float *k,  // (B, Tk, H, D) row stride ldk
                                const float *v,  // (B, Tk, H, D) row stride ldv
                                float *o,        // (B, Tq, H, D) row stride ldo
                                float *lse,      // (B, H, Tq) or NULL
                                float *probs) {  // (B, H, Tq, Tk) or NULL
    const int D = p->D;
    double acc[CHUNK];
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->H; h++)
            for (int i = 0; i < p->Tq; i++) {
                const float *qi = ROW(q, b, p->Tq, i, p->ldq, h, D);
                float *oi = ROW(o, b, p->Tq, i, p->ldo, h, D);
                const size_t row = ((size_t)b * p->H + h) * p->Tq + i;
                const int n = visible(p, b, i);
                /* Pass 1: the row maximum of the scaled scores. */
                double m = -INFINITY;
                for (int j = 0; j < n; j++) {
                    double s = p->scale * dot(qi, ROW(k, b, p->Tk, j, p->ldk, h, D), D);
                    if (s > m) m = s;
                }
                /* Pass 2, per chunk of D: l = Σ e^(s−m), o = Σ e^(s−m) v / l. */
                double l = 0;
                for (int d0 = 0; d0 < D; d0 += CHUNK) { /* D >= 1: runs at least once */
                    const int dn = D - d0 < CHUNK ? D - d0 : CHUNK;
                    memset(acc, 0, sizeof acc);
                    l = 0;
                    for (int j = 0; j < n; j++) {
                        double e = exp(p->scale * dot(qi, ROW(k, b, p->Tk, j, p->ldk, h, D), D) - m);
                        const float *vj = ROW(v, b, p->Tk, j, p->ldv, h, D) + d0;
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
                        pr[j] = j < n ? (float)exp(p->scale * dot(qi, ROW(k, b, p->Tk, j, p->ldk, h, D), D) - lse_i)
                                      : 0.0f;
                }
            }
}

/* The backward's per-pair quantities, recomputed on demand: p_ij = e^(s_ij − lse_i) and
 * ds_ij = p_ij (dO_i·v_j − D_i), where D_i = dO_i·O_i. */
static void pair(const attn_attention_params *p, const float *qi, const float *kj,
                 const float *vj, const float *doi, double lse_i, double di, double *pij,
                 double *dsij) {
    *pij = exp(p->scale * dot(qi, kj, p->D) - lse_i);
    *dsij = *pij * (dot(doi, vj, p->D) - di);
}

void attn_attention_backward_ref(const attn_attention_params *p,
                                 const float *q,   // (B, Tq, H, D) row stride ldq
                                 const float *k,   // (B, Tk, H, D) row stride ldk
                                 const float *v,   // (B, Tk, H, D) row stride ldv
                                 const float *o,   // (B, Tq, H, D) row stride ldo
                                 const float *lse, // (B, H, Tq)
                                 const float *do_, // (B, Tq, H, D) row stride ldo
                                 float *dq,        // (B, Tq, H, D) row stride ldq
                                 float *dk,        // (B, Tk, H, D) row stride ldk
                                 float *dv) {      // (B, Tk, H, D) row stride ldv
    const int D = p->D;
    double acc[CHUNK], acc2[CHUNK];
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->H; h++) {
            const float *lseb = lse + ((size_t)b * p->H + h) * p->Tq;
            /* Sweep 1, per query: dQ_i = scale Σ_j ds_ij k_j. */
            for (int i = 0; i < p->Tq; i++) {
                const float *qi = ROW(q, b, p->Tq, i, p->ldq, h, D);
                const float *doi = ROW(do_, b, p->Tq, i, p->ldo, h, D);
                const double di = dot(doi, ROW(o, b, p->Tq, i, p->ldo, h, D), D);
                float *dqi = ROW(dq, b, p->Tq, i, p->ldq, h, D);
                const int n = visible(p, b, i);
                for (int d0 = 0; d0 < D; d0 += CHUNK) {
                    const int dn = D - d0 < CHUNK ? D - d0 : CHUNK;
                    memset(acc, 0, sizeof acc);
                    for (int j = 0; j < n; j++) {
                        const float *kj = ROW(k, b, p->Tk, j, p->ldk, h, D);
                        double pij, ds;
                        pair(p, qi, kj, ROW(v, b, p->Tk, j, p->ldv, h, D), doi, lseb[i], di, &pij,
                             &ds);
                        for (int d = 0; d < dn; d++) acc[d] += ds * kj[d0 + d];
                    }
                    for (int d = 0; d < dn; d++) dqi[d0 + d] = (float)(p->scale * acc[d]);
                }
            }
            /* Sweep 2, per key: dK_j = scale Σ_i ds_ij q_i, dV_j = Σ_i p_ij dO_i, over the
             * queries that see key j. */
            for (int j = 0; j < p->Tk; j++) {
                const float *kj = ROW(k, b, p->Tk, j, p->ldk, h, D);
                const float *vj = ROW(v, b, p->Tk, j, p->ldv, h, D);
                float *dkj = ROW(dk, b, p->Tk, j, p->ldk, h, D);
                float *dvj = ROW(dv, b, p->Tk, j, p->ldv, h, D);
                for (int d0 = 0; d0 < D; d0 += CHUNK) {
                    const int dn = D - d0 < CHUNK ? D - d0 : CHUNK;
                    memset(acc, 0, sizeof acc);
                    memset(acc2, 0, sizeof acc2);
                    for (int i = 0; i < p->Tq; i++) {
                        if (j >= visible(p, b, i)) continue;
                        const float *qi = ROW(q, b, p->Tq, i, p->ldq, h, D);
                        const float *doi = ROW(do_, b, p->Tq, i, p->ldo, h, D);
                        const double di = dot(doi, ROW(o, b, p->Tq, i, p->ldo, h, D), D);
                        double pij, ds;
                        pair(p, qi, kj, vj, doi, lseb[i], di, &pij, &ds);
                        for (int d = 0; d < dn; d++) {
                            acc[d] += ds * qi[d0 + d];
                            acc2[d] += pij * doi[d0 + d];
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

/* elementwise_ref.c — reference paths of the row-wise and elementwise kernels: softmax, layer
 * norm, RMSNorm, activations, rotary embeddings, gated linear units, embedding and cross-entropy,
 * forward and backward.
 *
 * Plain single-threaded loops written to be read next to the formulas in attn_kernels.h, with
 * double accumulators and libm's double exp/erf/tanh so that this path is the accuracy yardstick
 * for the SIMD paths (elementwise_simd.c). Arguments were validated in dispatch.c.
 *
 * Conventions shared with the SIMD paths (documented in the tests and the report):
 *   - a softmax row whose entries are all -inf gives a row of zeros (PyTorch gives NaN);
 *   - cross-entropy with every row ignored gives loss 0 and zero gradients (PyTorch: NaN). */
#include "kernels-impl.h"

#include <math.h>
#include <string.h>

/* ---- softmax ------------------------------------------------------------------------------- */

void attn_softmax_forward_ref(int N, int D, const float *x, float *y) { // x, y: (N, D)
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * D;
        float *yr = y + (size_t)i * D;
        float m = -INFINITY;
        for (int j = 0; j < D; j++) m = fmaxf(m, xr[j]);
        if (m == -INFINITY) { /* every entry -inf: no mass anywhere, define as zeros */
            memset(yr, 0, sizeof(float) * (size_t)D);
            continue;
        }
        /* Subtracting the max keeps exp() <= 1, so large logits cannot overflow. */
        double s = 0;
        for (int j = 0; j < D; j++) s += exp((double)xr[j] - m);
        for (int j = 0; j < D; j++) yr[j] = (float)(exp((double)xr[j] - m) / s);
    }
}

void attn_log_softmax_forward_ref(int N, int D, const float *x, float *y) { // x, y: (N, D)
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * D;
        float *yr = y + (size_t)i * D;
        float m = -INFINITY;
        for (int j = 0; j < D; j++) m = fmaxf(m, xr[j]);
        if (m == -INFINITY) { /* every entry -inf: log 0 everywhere */
            for (int j = 0; j < D; j++) yr[j] = -INFINITY;
            continue;
        }
        double s = 0;
        for (int j = 0; j < D; j++) s += exp((double)xr[j] - m);
        const float ls = (float)log(s);
        for (int j = 0; j < D; j++) yr[j] = (xr[j] - m) - ls;
    }
}

void attn_softmax_backward_ref(int N, int D, const float *y, const float *dy,
                               float *dx) { // y, dy, dx: (N, D)
    for (int i = 0; i < N; i++) {
        const float *yr = y + (size_t)i * D, *dyr = dy + (size_t)i * D;
        float *dxr = dx + (size_t)i * D;
        double dot = 0;
        for (int j = 0; j < D; j++) dot += (double)dyr[j] * yr[j];
        /* dx may be dy: element j is read before it is written. */
        for (int j = 0; j < D; j++) dxr[j] = (float)((double)yr[j] * ((double)dyr[j] - dot));
    }
}

/* ---- layer norm ---------------------------------------------------------------------------- */

void attn_layernorm_forward_ref(int N, int C, const float *x, // (N, C)
                                const float *w, const float *b, // (C) or NULL
                                float eps, float *y,            // (N, C)
                                float *mean, float *rstd) {     // (N) or NULL
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C;
        float *yr = y + (size_t)i * C;
        double mu = 0, var = 0;
        for (int c = 0; c < C; c++) mu += xr[c];
        mu /= C;
        /* Two passes (not E[x^2] - mu^2), so a constant row gives exactly var = 0. */
        for (int c = 0; c < C; c++) var += ((double)xr[c] - mu) * ((double)xr[c] - mu);
        var /= C;
        double rs = 1.0 / sqrt(var + eps);
        for (int c = 0; c < C; c++) {
            double v = ((double)xr[c] - mu) * rs;
            if (w) v *= w[c];
            if (b) v += b[c];
            yr[c] = (float)v;
        }
        if (mean) mean[i] = (float)mu;
        if (rstd) rstd[i] = (float)rs;
    }
}

/* With xhat = (x - mean) rstd and g = dy w:
 *   dx = rstd (g - mean_c(g) - xhat mean_c(g xhat)),  dw += sum_n dy xhat,  db += sum_n dy. */
void attn_layernorm_backward_ref(int N, int C, const float *x, // (N, C)
                                 const float *w,               // (C) or NULL
                                 const float *mean, const float *rstd, // (N)
                                 const float *dy, float *dx,   // (N, C)
                                 float *dw, float *db) {       // (C) or NULL
    /* Parameter gradients first: they read dy, which dx may overwrite if the caller aliases. */
    if (dw || db) {
        for (int c = 0; c < C; c++) {
            double sw = 0, sb = 0;
            for (int i = 0; i < N; i++) {
                double g = dy[(size_t)i * C + c];
                sw += g * (((double)x[(size_t)i * C + c] - mean[i]) * rstd[i]);
                sb += g;
            }
            if (dw) dw[c] += (float)sw;
            if (db) db[c] += (float)sb;
        }
    }
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C, *dyr = dy + (size_t)i * C;
        float *dxr = dx + (size_t)i * C;
        double mu = mean[i], rs = rstd[i];
        double sg = 0, sgx = 0;
        for (int c = 0; c < C; c++) {
            double g = (double)dyr[c] * (w ? w[c] : 1.0f);
            sg += g;
            sgx += g * ((xr[c] - mu) * rs);
        }
        sg /= C;
        sgx /= C;
        for (int c = 0; c < C; c++) {
            double g = (double)dyr[c] * (w ? w[c] : 1.0f);
            dxr[c] = (float)(rs * (g - sg - ((xr[c] - mu) * rs) * sgx));
        }
    }
}

/* ---- activations --------------------------------------------------------------------------- */

#define SQRT_2_OVER_PI 0.79788456080286535588
#define GELU_C 0.044715
#define INV_SQRT_2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794

/* act(v) in double and, when d is not NULL, act'(v) into *d: the one scalar definition behind
 * the activation and GLU reference kernels. */
static double act_eval(attn_act act, double v, double *d) {
    double y = v, dd = 1;
    switch (act) {
    case ATTN_ACT_NONE: break;
    case ATTN_ACT_RELU:
        y = v > 0 ? v : 0;
        dd = v > 0 ? 1 : 0; /* PyTorch: gradient 0 at x == 0 */
        break;
    case ATTN_ACT_GELU_TANH: {
        double t = tanh(SQRT_2_OVER_PI * (v + GELU_C * v * v * v));
        y = 0.5 * v * (1 + t);
        dd = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * GELU_C * v * v);
        break;
    }
    case ATTN_ACT_GELU_ERF:
        y = 0.5 * v * (1 + erf(v * INV_SQRT_2));
        dd = 0.5 * (1 + erf(v * INV_SQRT_2)) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
        break;
    case ATTN_ACT_SILU: {
        /* s = sigmoid(v) and c = 1 − s from e = exp(−|v|) <= 1: no overflow, no cancellation.
         * At ±inf the limits (−0 and +inf, derivative 0 and 1) instead of inf·0. */
        double e = exp(-fabs(v)), r = 1 / (1 + e);
        double sg = v < 0 ? e * r : r, c = v < 0 ? r : e * r;
        y = v == -INFINITY ? -0.0 : v * sg;
        dd = isinf(v) ? (v > 0 ? 1 : 0) : sg * (1 + v * c);
        break;
    }
    default: dd = 0; break;
    }
    if (d) *d = dd;
    return y;
}

void attn_act_forward_ref(attn_act act, size_t n, const float *x, float *y) { // x, y: (n)
    for (size_t i = 0; i < n; i++) y[i] = (float)act_eval(act, x[i], NULL);
}

void attn_act_backward_ref(attn_act act, size_t n, const float *x, const float *dy,
                           float *dx) { // x, dy, dx: (n)
    for (size_t i = 0; i < n; i++) {
        double d;
        act_eval(act, x[i], &d);
        dx[i] = (float)(d * dy[i]);
    }
}

/* ---- RMSNorm ------------------------------------------------------------------------------- */

void attn_rmsnorm_forward_ref(int N, int C, const float *x, // (N, C)
                              const float *w,               // (C) or NULL
                              float eps, float *y,          // (N, C), may be x
                              float *rstd) {                // (N) or NULL
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C;
        float *yr = y + (size_t)i * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)xr[c] * xr[c]; /* exact squares */
        double rs = 1.0 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) yr[c] = (float)((double)xr[c] * rs * (w ? w[c] : 1.0f));
        if (rstd) rstd[i] = (float)rs;
    }
}

/* With g = dy w and r = rstd: y_c = x_c r w_c and dr/dx_c = −r³ x_c / C, so
 *   dx = r (g − x r² mean_c(g x)),   dw += sum_n dy x r. */
void attn_rmsnorm_backward_ref(int N, int C, const float *x, // (N, C)
                               const float *w,               // (C) or NULL
                               const float *rstd,            // (N)
                               const float *dy, float *dx,   // (N, C); dx may be dy
                               float *dw) {                  // (C) or NULL
    /* The weight gradient first: it reads dy, which dx may overwrite. */
    if (dw) {
        for (int c = 0; c < C; c++) {
            double sw = 0;
            for (int i = 0; i < N; i++)
                sw += (double)dy[(size_t)i * C + c] * x[(size_t)i * C + c] * rstd[i];
            dw[c] += (float)sw;
        }
    }
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C, *dyr = dy + (size_t)i * C;
        float *dxr = dx + (size_t)i * C;
        double rs = rstd[i], sgx = 0;
        for (int c = 0; c < C; c++) sgx += (double)dyr[c] * (w ? w[c] : 1.0f) * xr[c];
        double k = rs * rs * sgx / C;
        for (int c = 0; c < C; c++) {
            double g = (double)dyr[c] * (w ? w[c] : 1.0f);
            dxr[c] = (float)(rs * (g - xr[c] * k));
        }
    }
}

/* ---- rotary position embeddings ------------------------------------------------------------ */

void attn_rope_apply_ref(attn_rope_mode mode, int N, int H, int D, int R,
                         float *x, int ld,                       // (N, ld): H heads of D
                         const int32_t *pos,                     // (N)
                         const float *cos_t, const float *sin_t, // (P, R/2)
                         bool inverse) {
    const int half = R / 2;
    const double sgn = inverse ? -1.0 : 1.0; /* R(−θ): the sine changes sign */
    for (int n = 0; n < N; n++) {
        const float *cr = cos_t + (size_t)pos[n] * half, *sr = sin_t + (size_t)pos[n] * half;
        for (int h = 0; h < H; h++) {
            float *xh = x + (size_t)n * ld + (size_t)h * D;
            for (int i = 0; i < half; i++) {
                /* the pair (a, b): (i, i + R/2) for rotate_half, (2i, 2i + 1) interleaved */
                const int a = mode == ATTN_ROPE_HALF ? i : 2 * i;
                const int b = mode == ATTN_ROPE_HALF ? i + half : a + 1;
                double c = cr[i], sn = sgn * sr[i], xa = xh[a], xb = xh[b];
                xh[a] = (float)(xa * c - xb * sn);
                xh[b] = (float)(xb * c + xa * sn);
            }
        }
    }
}

void attn_rope_tables_impl(int P, int R, const float *inv_freq, // (R/2)
                           float *cos_t, float *sin_t) {        // (P, R/2)
    const int half = R / 2;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < half; i++) {
            /* The angle rounded to float first, as transformers' float32 inv_freq ⊗ position
             * product gives it; then cos and sin of that float, in double, rounded once. */
            float a = (float)p * inv_freq[i];
            cos_t[(size_t)p * half + i] = (float)cos((double)a);
            sin_t[(size_t)p * half + i] = (float)sin((double)a);
        }
}

/* ---- gated linear units -------------------------------------------------------------------- */

void attn_glu_forward_ref(attn_act act, int N, int F, const float *g, int ldg, // (N, F) at ldg
                          const float *u, int ldu,                             // (N, F) at ldu
                          float *h, int ldh) {                                 // (N, F) at ldh
    for (int n = 0; n < N; n++)
        for (int j = 0; j < F; j++) {
            /* h may be g or u: both are read before h is written */
            double gv = g[(size_t)n * ldg + j], uv = u[(size_t)n * ldu + j];
            h[(size_t)n * ldh + j] = (float)(act_eval(act, gv, NULL) * uv);
        }
}

void attn_glu_backward_ref(attn_act act, int N, int F, const float *g, int ldg, // (N, F)
                           const float *u, int ldu,                             // (N, F)
                           const float *dh, int ldh,                            // (N, F)
                           float *dg, int lddg, float *du, int lddu) {          // (N, F)
    for (int n = 0; n < N; n++)
        for (int j = 0; j < F; j++) {
            /* every input of the element is read before either output is written */
            double gv = g[(size_t)n * ldg + j], uv = u[(size_t)n * ldu + j];
            double d, a = act_eval(act, gv, &d), dhv = dh[(size_t)n * ldh + j];
            dg[(size_t)n * lddg + j] = (float)(dhv * uv * d);
            du[(size_t)n * lddu + j] = (float)(dhv * a);
        }
}

/* ---- embedding ----------------------------------------------------------------------------- */

void attn_embedding_forward_ref(int N, int V, int C, const int32_t *ids, // (N)
                                const float *table,                      // (V, C)
                                float *out) {                            // (N, C)
    (void)V;
    for (int i = 0; i < N; i++)
        memcpy(out + (size_t)i * C, table + (size_t)ids[i] * C, sizeof(float) * (size_t)C);
}

void attn_embedding_backward_ref(int N, int V, int C, const int32_t *ids, // (N)
                                 const float *dout,                       // (N, C)
                                 float *dtable) {                         // (V, C)
    (void)V;
    /* Rows in order, so repeated ids accumulate in a fixed order (the SIMD path matches it). */
    for (int i = 0; i < N; i++) {
        float *t = dtable + (size_t)ids[i] * C;
        const float *g = dout + (size_t)i * C;
        for (int c = 0; c < C; c++) t[c] += g[c];
    }
}

/* ---- cross-entropy ------------------------------------------------------------------------- */

/* Per kept row with target t, eps = label_smoothing, p = softmax(row):
 *   loss_row = (1 - eps) (lse - x_t) + eps/V sum_j (lse - x_j)
 *   dloss_row/dx_j = p_j - (1 - eps) [j == t] - eps/V
 * and the mean divides both by the number of kept rows (PyTorch's reduction='mean'). */
void attn_cross_entropy_ref(int N, int V, const float *logits, // (N, V)
                            const int32_t *targets,            // (N)
                            int32_t ignore_index, float label_smoothing, float *loss,
                            float *dlogits) {                  // (N, V) or NULL; may be logits
    int kept = 0;
    for (int i = 0; i < N; i++) kept += targets[i] != ignore_index;
    double eps = label_smoothing, total = 0;
    double inv = kept ? 1.0 / kept : 0.0;
    for (int i = 0; i < N; i++) {
        const float *xr = logits + (size_t)i * V;
        float *dr = dlogits ? dlogits + (size_t)i * V : NULL;
        if (targets[i] == ignore_index) {
            if (dr) memset(dr, 0, sizeof(float) * (size_t)V);
            continue;
        }
        double m = -INFINITY;
        for (int j = 0; j < V; j++) m = fmax(m, xr[j]);
        double s = 0, sd = 0;
        for (int j = 0; j < V; j++) {
            s += exp(xr[j] - m);
            sd += xr[j] - m;
        }
        double ls = log(s), dt = xr[targets[i]] - m;
        /* In terms of d = x - m: lse - x_t = log s - d_t, mean_j (lse - x_j) = log s - sd/V. */
        total += (1 - eps) * (ls - dt) + eps * (ls - sd / V);
        if (dr) {
            int t = targets[i];
            for (int j = 0; j < V; j++) {
                double g = exp(xr[j] - m) / s - eps / V - (j == t ? 1 - eps : 0);
                dr[j] = (float)(g * inv);
            }
        }
    }
    *loss = kept ? (float)(total * inv) : 0.0f;
}

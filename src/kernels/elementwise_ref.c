/* elementwise_ref.c — reference paths of the row-wise and elementwise kernels: softmax, layer
 * norm, activations, embedding and cross-entropy, forward and backward.
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

void attn_act_forward_ref(attn_act act, size_t n, const float *x, float *y) { // x, y: (n)
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        switch (act) {
        case ATTN_ACT_NONE: break;
        case ATTN_ACT_RELU: v = v > 0 ? v : 0; break;
        case ATTN_ACT_GELU_TANH:
            v = 0.5 * v * (1 + tanh(SQRT_2_OVER_PI * (v + GELU_C * v * v * v)));
            break;
        case ATTN_ACT_GELU_ERF: v = 0.5 * v * (1 + erf(v * INV_SQRT_2)); break;
        }
        y[i] = (float)v;
    }
}

void attn_act_backward_ref(attn_act act, size_t n, const float *x, const float *dy,
                           float *dx) { // x, dy, dx: (n)
    for (size_t i = 0; i < n; i++) {
        double v = x[i], d;
        switch (act) {
        case ATTN_ACT_NONE: d = 1; break;
        case ATTN_ACT_RELU: d = v > 0 ? 1 : 0; break; /* PyTorch: gradient 0 at x == 0 */
        case ATTN_ACT_GELU_TANH: {
            double t = tanh(SQRT_2_OVER_PI * (v + GELU_C * v * v * v));
            d = 0.5 * (1 + t) +
                0.5 * v * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * GELU_C * v * v);
            break;
        }
        case ATTN_ACT_GELU_ERF:
            d = 0.5 * (1 + erf(v * INV_SQRT_2)) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
            break;
        default: d = 0; break;
        }
        dx[i] = (float)(d * dy[i]);
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

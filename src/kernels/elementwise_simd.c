/* elementwise_simd.c — AVX-512 / AVX2 paths of the row-wise and elementwise kernels (softmax,
 * layer norm, RMSNorm, activations, gated linear units, rotary embeddings, embedding,
 * cross-entropy), forward and backward.
 *
 * Compiled twice by the Makefile (ATTN_ISA=512 and ATTN_ISA=2); vmath_ew.h maps the vector type
 * vf onto __m512 or __m256, so each kernel is written once. Loop tails use masked loads/stores, so
 * every row length works without a scalar epilogue. OpenMP splits rows across threads once a call
 * has at least PAR_MIN_WORK elements (below that the fork/join costs more than it saves); sums
 * over rows (layer norm's dw/db, RMSNorm's dw, embedding's dtable) use per-thread partials or a
 * column split, never atomics. Semantics are those of elementwise_ref.c. */
#include "kernels-impl.h"
#include "vmath_ew.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define PAR_MIN_WORK 32768

/* Sums over long rows are accumulated in float vectors for blocks of SUM_BLOCK elements and the
 * block totals in double: 32 lanes x 1024/32 terms keep float rounding negligible even for a
 * 50257-wide vocabulary row. A multiple of 2 VL. */
#define SUM_BLOCK 1024

/* ---- softmax ------------------------------------------------------------------------------- */

static float row_max(int D, const float *x) { // x: (D)
    vf m0 = v_set(-INFINITY), m1 = m0;
    int j = 0;
    for (; j + 2 * VL <= D; j += 2 * VL) {
        m0 = v_max(m0, v_ld(x + j));
        m1 = v_max(m1, v_ld(x + j + VL));
    }
    for (; j + VL <= D; j += VL) m0 = v_max(m0, v_ld(x + j));
    if (j < D) m0 = v_max(m0, v_ldm(x + j, v_tail(D - j), v_set(-INFINITY)));
    return v_hmax(v_max(m0, m1));
}

/* y[j] = exp(x[j] - m); returns sum_j y[j]. y may be x; y NULL only sums. */
static double exp_shift_sum(int D, const float *x, float m, float *y) { // x, y: (D)
    const vf vmx = v_set(m);
    double total = 0;
    for (int b = 0; b < D; b += SUM_BLOCK) {
        int end = ATTN_MIN(D, b + SUM_BLOCK), j = b;
        vf s0 = v_zero(), s1 = v_zero();
        for (; j + 2 * VL <= end; j += 2 * VL) {
            vf e0 = v_exp(v_sub(v_ld(x + j), vmx));
            vf e1 = v_exp(v_sub(v_ld(x + j + VL), vmx));
            if (y) {
                v_st(y + j, e0);
                v_st(y + j + VL, e1);
            }
            s0 = v_add(s0, e0);
            s1 = v_add(s1, e1);
        }
        for (; j < end; j += VL) {
            vm msk = v_tail(ATTN_MIN(VL, end - j));
            /* Lanes past the end load -inf, whose exp is 0. */
            vf e = v_exp(v_sub(v_ldm(x + j, msk, v_set(-INFINITY)), vmx));
            if (y) v_stm(y + j, msk, e);
            s0 = v_add(s0, e);
        }
        total += v_hsum(v_add(s0, s1));
    }
    return total;
}

static void scale_row(int D, float *y, float a) { // y: (D)
    const vf va = v_set(a);
    int j = 0;
    for (; j + VL <= D; j += VL) v_st(y + j, v_mul(v_ld(y + j), va));
    if (j < D) {
        vm msk = v_tail(D - j);
        v_stm(y + j, msk, v_mul(v_ldm(y + j, msk, v_zero()), va));
    }
}

void ATTN_FN(attn_softmax_forward)(int N, int D, const float *x, float *y) { // x, y: (N, D)
#pragma omp parallel for schedule(static) if ((size_t)N * D >= PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * D;
        float *yr = y + (size_t)i * D;
        float m = row_max(D, xr);
        if (m == -INFINITY) { /* all -inf: zeros, as the reference path */
            memset(yr, 0, sizeof(float) * (size_t)D);
            continue;
        }
        double s = exp_shift_sum(D, xr, m, yr);
        scale_row(D, yr, (float)(1.0 / s));
    }
}

void ATTN_FN(attn_log_softmax_forward)(int N, int D, const float *x, float *y) { // x, y: (N, D)
#pragma omp parallel for schedule(static) if ((size_t)N * D >= PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * D;
        float *yr = y + (size_t)i * D;
        const float m = row_max(D, xr);
        /* all -inf: -inf everywhere, as the reference path (m − m would be NaN) */
        const float ls = m == -INFINITY ? 0.0f : (float)log(exp_shift_sum(D, xr, m, NULL));
        const vf vm_ = v_set(m == -INFINITY ? 0.0f : m), vls = v_set(m == -INFINITY ? INFINITY : ls);
        int j = 0;
        for (; j + VL <= D; j += VL) v_st(yr + j, v_sub(v_sub(v_ld(xr + j), vm_), vls));
        if (j < D) {
            vm msk = v_tail(D - j);
            v_stm(yr + j, msk, v_sub(v_sub(v_ldm(xr + j, msk, v_zero()), vm_), vls));
        }
    }
}

void ATTN_FN(attn_softmax_backward)(int N, int D, const float *y, const float *dy,
                                    float *dx) { // y, dy, dx: (N, D)
#pragma omp parallel for schedule(static) if ((size_t)N * D >= PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++) {
        const float *yr = y + (size_t)i * D, *dyr = dy + (size_t)i * D;
        float *dxr = dx + (size_t)i * D;
        double dot = 0;
        for (int b = 0; b < D; b += SUM_BLOCK) {
            int end = ATTN_MIN(D, b + SUM_BLOCK), j = b;
            vf a0 = v_zero(), a1 = v_zero();
            for (; j + 2 * VL <= end; j += 2 * VL) {
                a0 = v_fma(v_ld(yr + j), v_ld(dyr + j), a0);
                a1 = v_fma(v_ld(yr + j + VL), v_ld(dyr + j + VL), a1);
            }
            for (; j < end; j += VL) {
                vm msk = v_tail(ATTN_MIN(VL, end - j));
                a0 = v_fma(v_ldm(yr + j, msk, v_zero()), v_ldm(dyr + j, msk, v_zero()), a0);
            }
            dot += v_hsum(v_add(a0, a1));
        }
        const vf vdot = v_set((float)dot);
        int j = 0;
        for (; j + VL <= D; j += VL) /* dx may be dy: same index read, then written */
            v_st(dxr + j, v_mul(v_ld(yr + j), v_sub(v_ld(dyr + j), vdot)));
        if (j < D) {
            vm msk = v_tail(D - j);
            v_stm(dxr + j, msk,
                  v_mul(v_ldm(yr + j, msk, v_zero()), v_sub(v_ldm(dyr + j, msk, v_zero()), vdot)));
        }
    }
}

/* ---- layer norm ---------------------------------------------------------------------------- */

/* Mean and biased variance of one row. The mean is summed in double (each float widened
 * exactly), so a constant row gives exactly mean = x and var = 0, as PyTorch, and rows whose
 * |mean| >> std do not lose it to cancellation. It is returned as hi + lo floats: x − hi is exact
 * for x near the mean, so d = (x − hi) − lo keeps the precision of the double mean, which a
 * single float mean (half an ulp of |mean|) would lose. The variance is a second pass over d
 * with the classic correction (sum d)^2 / C. */
static void row_moments(int C, const float *x, float *mean_hi, float *mean_lo,
                        float *var_out) { // x: (C)
    vd a0 = vd_zero(), a1 = vd_zero();
    int j = 0;
    for (; j + 2 * VL <= C; j += 2 * VL) {
        a0 = vd_acc(a0, v_ld(x + j));
        a1 = vd_acc(a1, v_ld(x + j + VL));
    }
    for (; j < C; j += VL) a0 = vd_acc(a0, v_ldm(x + j, v_tail(ATTN_MIN(VL, C - j)), v_zero()));
    double mean = vd_hsum(a0) + vd_hsum(a1);
    mean /= C;
    float hi = (float)mean, lo = (float)(mean - hi);
    const vf vhi = v_set(hi), vlo = v_set(lo);
    double sq = 0, sd = 0;
    for (int b = 0; b < C; b += SUM_BLOCK) {
        int end = ATTN_MIN(C, b + SUM_BLOCK);
        vf q0 = v_zero(), q1 = v_zero(), d0 = v_zero();
        for (j = b; j + 2 * VL <= end; j += 2 * VL) {
            vf e0 = v_sub(v_sub(v_ld(x + j), vhi), vlo);
            vf e1 = v_sub(v_sub(v_ld(x + j + VL), vhi), vlo);
            q0 = v_fma(e0, e0, q0);
            q1 = v_fma(e1, e1, q1);
            d0 = v_add(d0, v_add(e0, e1));
        }
        for (; j < end; j += VL) {
            vm msk = v_tail(ATTN_MIN(VL, end - j));
            vf e = v_sel(msk, v_sub(v_sub(v_ldm(x + j, msk, vhi), vhi), vlo), v_zero());
            q0 = v_fma(e, e, q0);
            d0 = v_add(d0, e);
        }
        sq += v_hsum(v_add(q0, q1));
        sd += v_hsum(d0);
    }
    double var = (sq - sd * sd / C) / C;
    *mean_hi = hi;
    *mean_lo = lo;
    *var_out = (float)(var > 0 ? var : 0);
}

void ATTN_FN(attn_layernorm_forward)(int N, int C, const float *x, // (N, C)
                                     const float *w, const float *b, // (C) or NULL
                                     float eps, float *y,            // (N, C)
                                     float *mean, float *rstd) {     // (N) or NULL
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C;
        float *yr = y + (size_t)i * C;
        float hi, lo, var;
        row_moments(C, xr, &hi, &lo, &var);
        float rs = (float)(1.0 / sqrt((double)var + eps));
        const vf vhi = v_set(hi), vlo = v_set(lo), vrs = v_set(rs), one = v_set(1.0f);
        int j = 0;
        /* y may be x: each element is read before it is written. */
        for (; j + VL <= C; j += VL) {
            vf sc = w ? v_mul(vrs, v_ld(w + j)) : vrs;
            vf sh = b ? v_ld(b + j) : v_zero();
            v_st(yr + j, v_fma(v_sub(v_sub(v_ld(xr + j), vhi), vlo), sc, sh));
        }
        if (j < C) {
            vm msk = v_tail(C - j);
            vf sc = w ? v_mul(vrs, v_ldm(w + j, msk, one)) : vrs;
            vf sh = b ? v_ldm(b + j, msk, v_zero()) : v_zero();
            v_stm(yr + j, msk, v_fma(v_sub(v_sub(v_ldm(xr + j, msk, vhi), vhi), vlo), sc, sh));
        }
        if (mean) mean[i] = hi;
        if (rstd) rstd[i] = rs;
    }
}

/* dw, db over a block of columns [c0, c0 + width) (width <= 4 VL): accumulators stay in registers
 * across all N rows. Each block is owned by one thread, so accumulating needs no atomics and the
 * summation order does not depend on the thread count. */
#define LN_COLS (4 * VL)
static void ln_param_grad_block(int N, int C, int c0, int width, const float *x, // (N, C)
                                const float *mean, const float *rstd,             // (N)
                                const float *dy, float *dw, float *db) { // dy (N, C); dw, db (C)
    vf aw[4], ab[4];
    vm msk[4];
    int nv = (width + VL - 1) / VL;
    for (int k = 0; k < 4; k++) {
        aw[k] = ab[k] = v_zero();
        msk[k] = v_tail(ATTN_MAX(0, ATTN_MIN(VL, width - k * VL)));
    }
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C + c0, *dyr = dy + (size_t)i * C + c0;
        const vf mu = v_set(mean[i]), rs = v_set(rstd[i]);
        if (nv == 4 && width == LN_COLS) { /* full block: plain loads */
            for (int k = 0; k < 4; k++) {
                vf g = v_ld(dyr + k * VL);
                aw[k] = v_fma(g, v_mul(v_sub(v_ld(xr + k * VL), mu), rs), aw[k]);
                ab[k] = v_add(ab[k], g);
            }
        } else {
            for (int k = 0; k < nv; k++) {
                vf g = v_ldm(dyr + k * VL, msk[k], v_zero());
                vf xh = v_mul(v_sub(v_ldm(xr + k * VL, msk[k], mu), mu), rs);
                aw[k] = v_fma(g, xh, aw[k]);
                ab[k] = v_add(ab[k], g);
            }
        }
    }
    for (int k = 0; k < nv; k++) {
        float *pw = dw ? dw + c0 + k * VL : NULL, *pb = db ? db + c0 + k * VL : NULL;
        if (pw) v_stm(pw, msk[k], v_add(v_ldm(pw, msk[k], v_zero()), aw[k]));
        if (pb) v_stm(pb, msk[k], v_add(v_ldm(pb, msk[k], v_zero()), ab[k]));
    }
}

/* One row of dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w. If pw is not NULL, also
 * pw += dy xhat and pb += dy (this thread's partial dw, db). dx may be dy: the second sweep reads
 * each element before writing it. */
static void ln_bwd_row(int C, const float *xr, const float *w, float mean, float rstd, // (C)
                       const float *dyr, float *dxr, float *pw, float *pb) {           // (C)
    const vf mu = v_set(mean), rs = v_set(rstd), one = v_set(1.0f);
    double sg = 0, sgx = 0;
    for (int b = 0; b < C; b += SUM_BLOCK) {
        int end = ATTN_MIN(C, b + SUM_BLOCK), j = b;
        vf a0 = v_zero(), a1 = v_zero();
        for (; j + VL <= end; j += VL) {
            vf g = v_ld(dyr + j);
            if (w) g = v_mul(g, v_ld(w + j));
            a0 = v_add(a0, g);
            a1 = v_fma(g, v_mul(v_sub(v_ld(xr + j), mu), rs), a1);
        }
        if (j < end) {
            vm msk = v_tail(end - j);
            vf g = v_ldm(dyr + j, msk, v_zero());
            if (w) g = v_mul(g, v_ldm(w + j, msk, one));
            a0 = v_add(a0, g);
            a1 = v_fma(g, v_mul(v_sub(v_ldm(xr + j, msk, mu), mu), rs), a1);
        }
        sg += v_hsum(a0);
        sgx += v_hsum(a1);
    }
    const vf mg = v_set((float)(sg / C)), mgx = v_set((float)(sgx / C));
    int j = 0;
    for (; j + VL <= C; j += VL) {
        vf d = v_ld(dyr + j), g = w ? v_mul(d, v_ld(w + j)) : d;
        vf xh = v_mul(v_sub(v_ld(xr + j), mu), rs);
        if (pw) {
            v_st(pw + j, v_fma(d, xh, v_ld(pw + j)));
            v_st(pb + j, v_add(d, v_ld(pb + j)));
        }
        v_st(dxr + j, v_mul(rs, v_fnma(xh, mgx, v_sub(g, mg))));
    }
    if (j < C) {
        vm msk = v_tail(C - j);
        vf d = v_ldm(dyr + j, msk, v_zero()), g = w ? v_mul(d, v_ldm(w + j, msk, one)) : d;
        vf xh = v_mul(v_sub(v_ldm(xr + j, msk, mu), mu), rs);
        if (pw) {
            v_stm(pw + j, msk, v_fma(d, xh, v_ldm(pw + j, msk, v_zero())));
            v_stm(pb + j, msk, v_add(d, v_ldm(pb + j, msk, v_zero())));
        }
        v_stm(dxr + j, msk, v_mul(rs, v_fnma(xh, mgx, v_sub(g, mg))));
    }
}

/* dw and db are sums over rows. Each thread accumulates its rows into a private (2, C) buffer
 * during the dx pass, so x and dy are read once; the buffers are then added in thread order (no
 * races; deterministic for a given thread count). If the buffers cannot be allocated, the
 * parameter gradients fall back to a column-partitioned pass (ln_param_grad_block) first. */
void ATTN_FN(attn_layernorm_backward)(int N, int C, const float *x, // (N, C)
                                      const float *w,               // (C) or NULL
                                      const float *mean, const float *rstd, // (N)
                                      const float *dy, float *dx,   // (N, C)
                                      float *dw, float *db) {       // (C) or NULL
    const int par = (size_t)N * C >= PAR_MIN_WORK && N > 1;
    int nt = 1;
#ifdef _OPENMP
    if (par) nt = ATTN_MAX(1, ATTN_MIN(omp_get_max_threads(), N));
#endif
    const size_t stride = ((size_t)2 * C + 15) & ~(size_t)15; /* 64-byte apart: no false sharing */
    float *part = NULL;
    if (dw || db) {
        part = attn_calloc(sizeof(float) * stride * (size_t)nt);
        if (!part) { /* fallback: parameter gradients first, dx may alias dy */
            int nblk = (C + LN_COLS - 1) / LN_COLS;
#pragma omp parallel for schedule(static) if (par && nblk > 1)
            for (int k = 0; k < nblk; k++)
                ln_param_grad_block(N, C, k * LN_COLS, ATTN_MIN(LN_COLS, C - k * LN_COLS), x,
                                    mean, rstd, dy, dw, db);
        }
    }
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *pw = part ? part + stride * (size_t)tid : NULL, *pb = pw ? pw + C : NULL;
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++)
            ln_bwd_row(C, x + (size_t)i * C, w, mean[i], rstd[i], dy + (size_t)i * C,
                       dx + (size_t)i * C, pw, pb);
    }
    if (part) {
        for (int t = 0; t < nt; t++) {
            const float *pw = part + stride * (size_t)t, *pb = pw + C;
            for (int c = 0; c < C; c++) {
                if (dw) dw[c] += pw[c];
                if (db) db[c] += pb[c];
            }
        }
        attn_free(part);
    }
}

/* ---- activations --------------------------------------------------------------------------- */

#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_C 0.044715f
#define INV_SQRT_2PI 0.39894228040143267794f

/* GELU, tanh form, written through e = exp(-2|u|) (u = sqrt(2/pi)(x + 0.044715 x^3)) instead of
 * tanh itself: with s = 1/(1+e),
 *   0.5 (1 + tanh u) = s (u >= 0) or e s (u < 0),   1 - tanh^2 u = 4 e s^2,
 * neither of which cancels, so the far negative tail and the derivative keep full relative
 * accuracy. u has the sign of x because 1 + 0.044715 x^2 > 0. */
static inline vf gelu_tanh_parts(vf x, vf *e_out, vf *s_out) {
    vf x2 = v_mul(x, x);
    /* -2|u| = (-2 sqrt(2/pi)) |x| (1 + 0.044715 x^2) */
    vf a = v_mul(v_abs(x), v_set(-2.0f * SQRT_2_OVER_PI));
    vf e = av_exp_nonpos(v_mul(a, v_fma(x2, v_set(GELU_C), v_set(1.0f))));
    vf s = v_div(v_set(1.0f), v_add(v_set(1.0f), e));
    *e_out = e;
    *s_out = s;
    return v_sel(v_lt(x, v_zero()), v_mul(e, s), s); /* 0.5 (1 + tanh u) */
}
static inline vf gelu_tanh_fwd(vf x) {
    vf e, s;
    return v_mul(x, gelu_tanh_parts(x, &e, &s));
}
/* The derivative into *d and the value returned (GLU's backward needs both; the plain backward
 * ignores the value, which the compiler then drops). */
static inline vf gelu_tanh_both(vf x, vf *d) {
    vf e, s;
    vf q = gelu_tanh_parts(x, &e, &s);
    vf x2 = v_mul(x, x);
    /* 0.5 x (1 - t^2) u'(x) = 2 x e s^2 sqrt(2/pi) (1 + 3 0.044715 x^2) */
    vf du = v_mul(v_set(2.0f * SQRT_2_OVER_PI), v_fma(x2, v_set(3.0f * GELU_C), v_set(1.0f)));
    *d = v_fma(v_mul(v_mul(x, e), v_mul(s, s)), du, q);
    return v_mul(x, q);
}
static inline vf gelu_erf_fwd(vf x) {
    vf e;
    return v_mul(x, v_normcdf(x, &e));
}
static inline vf gelu_erf_both(vf x, vf *d) {
    vf e;
    vf cdf = v_normcdf(x, &e); /* e = exp(-x^2/2) */
    *d = v_fma(v_mul(x, e), v_set(INV_SQRT_2PI), cdf);
    return v_mul(x, cdf);
}
/* max(0, x) with NaN kept (v_max returns its second operand on NaN), as torch.relu. */
static inline vf relu_fwd(vf x) { return v_max(v_zero(), x); }
/* PyTorch's threshold_backward: gradient 0 where x <= 0. */
static inline vf relu_both(vf x, vf *d) {
    *d = v_sel(v_gt(x, v_zero()), v_set(1.0f), v_zero());
    return relu_fwd(x);
}
/* SiLU: vmath.h's av_silu / av_silu_grad (shared with the GEMM epilogue). */
static inline vf silu_fwd(vf x) { return av_silu(x); }
static inline vf silu_both(vf x, vf *d) {
    vf y;
    *d = av_silu_grad(x, &y);
    return y;
}
/* The identity (GLU without an activation: the bilinear unit). */
static inline vf none_fwd(vf x) { return x; }
static inline vf none_both(vf x, vf *d) {
    *d = v_set(1.0f);
    return x;
}

static inline vf gelu_tanh_bwd(vf x, vf dy) {
    vf d;
    (void)gelu_tanh_both(x, &d);
    return v_mul(d, dy);
}
static inline vf gelu_erf_bwd(vf x, vf dy) {
    vf d;
    (void)gelu_erf_both(x, &d);
    return v_mul(d, dy);
}
static inline vf relu_bwd(vf x, vf dy) { return v_sel(v_gt(x, v_zero()), dy, v_zero()); }
static inline vf silu_bwd(vf x, vf dy) {
    vf d;
    (void)silu_both(x, &d);
    return v_mul(d, dy);
}

/* Elements per parallel chunk: large enough to amortise scheduling, a multiple of VL so only the
 * very last chunk has a tail. */
#define ACT_CHUNK 8192

#define MAP1(F)                                                                                  \
    do {                                                                                         \
        size_t i = lo;                                                                           \
        for (; i + VL <= hi; i += VL) v_st(y + i, F(v_ld(x + i)));                               \
        if (i < hi) {                                                                            \
            vm msk = v_tail((int)(hi - i));                                                      \
            v_stm(y + i, msk, F(v_ldm(x + i, msk, v_zero())));                                   \
        }                                                                                        \
    } while (0)

#define MAP2(F)                                                                                  \
    do {                                                                                         \
        size_t i = lo;                                                                           \
        for (; i + VL <= hi; i += VL) v_st(dx + i, F(v_ld(x + i), v_ld(dy + i)));                \
        if (i < hi) {                                                                            \
            vm msk = v_tail((int)(hi - i));                                                      \
            v_stm(dx + i, msk, F(v_ldm(x + i, msk, v_zero()), v_ldm(dy + i, msk, v_zero())));    \
        }                                                                                        \
    } while (0)

void ATTN_FN(attn_act_forward)(attn_act act, size_t n, const float *x, float *y) { // (n)
    if (act == ATTN_ACT_NONE) {
        if (x != y) memmove(y, x, n * sizeof(float));
        return;
    }
    size_t nchunk = (n + ACT_CHUNK - 1) / ACT_CHUNK;
    /* ReLU is memory-bound; threads only pay off on much larger inputs than for GELU. */
    size_t min_work = act == ATTN_ACT_RELU ? 8 * (size_t)PAR_MIN_WORK : PAR_MIN_WORK;
#pragma omp parallel for schedule(static) if (n >= min_work && nchunk > 1)
    for (size_t k = 0; k < nchunk; k++) {
        size_t lo = k * ACT_CHUNK, hi = ATTN_MIN(n, lo + ACT_CHUNK);
        switch (act) {
        case ATTN_ACT_RELU: MAP1(relu_fwd); break;
        case ATTN_ACT_GELU_TANH: MAP1(gelu_tanh_fwd); break;
        case ATTN_ACT_GELU_ERF: MAP1(gelu_erf_fwd); break;
        case ATTN_ACT_SILU: MAP1(silu_fwd); break;
        default: break;
        }
    }
}

void ATTN_FN(attn_act_backward)(attn_act act, size_t n, const float *x, const float *dy,
                                float *dx) { // x, dy, dx: (n)
    if (act == ATTN_ACT_NONE) {
        if (dx != dy) memmove(dx, dy, n * sizeof(float));
        return;
    }
    size_t nchunk = (n + ACT_CHUNK - 1) / ACT_CHUNK;
    size_t min_work = act == ATTN_ACT_RELU ? 8 * (size_t)PAR_MIN_WORK : PAR_MIN_WORK;
#pragma omp parallel for schedule(static) if (n >= min_work && nchunk > 1)
    for (size_t k = 0; k < nchunk; k++) {
        size_t lo = k * ACT_CHUNK, hi = ATTN_MIN(n, lo + ACT_CHUNK);
        switch (act) {
        case ATTN_ACT_RELU: MAP2(relu_bwd); break;
        case ATTN_ACT_GELU_TANH: MAP2(gelu_tanh_bwd); break;
        case ATTN_ACT_GELU_ERF: MAP2(gelu_erf_bwd); break;
        case ATTN_ACT_SILU: MAP2(silu_bwd); break;
        default: break;
        }
    }
}

/* ---- gated linear units -------------------------------------------------------------------- */

/* One row: h = act(g) ⊙ u. h may be g or u (each vector is loaded before it is stored). */
#define GLU_FWD(F)                                                                               \
    do {                                                                                         \
        int j = 0;                                                                               \
        for (; j + VL <= n; j += VL) v_st(h + j, v_mul(F(v_ld(g + j)), v_ld(u + j)));            \
        if (j < n) {                                                                             \
            vm msk = v_tail(n - j);                                                              \
            v_stm(h + j, msk, v_mul(F(v_ldm(g + j, msk, v_zero())), v_ldm(u + j, msk, v_zero()))); \
        }                                                                                        \
    } while (0)

static void glu_fwd_row(attn_act act, int n, const float *g, const float *u, float *h) { // (n)
    switch (act) {
    case ATTN_ACT_NONE: GLU_FWD(none_fwd); break;
    case ATTN_ACT_RELU: GLU_FWD(relu_fwd); break;
    case ATTN_ACT_GELU_TANH: GLU_FWD(gelu_tanh_fwd); break;
    case ATTN_ACT_GELU_ERF: GLU_FWD(gelu_erf_fwd); break;
    case ATTN_ACT_SILU: GLU_FWD(silu_fwd); break;
    }
}

/* One row: dg = dh ⊙ u ⊙ act'(g), du = dh ⊙ act(g). All three inputs of a vector are loaded
 * before either output is stored, so dg / du may be any input at the same index. */
#define GLU_BWD_VEC(BOTH, G, U, DH, STORE)                                                       \
    do {                                                                                         \
        vf d_, a_ = BOTH(G, &d_), dh_ = (DH);                                                    \
        vf gg_ = v_mul(v_mul(dh_, (U)), d_), gu_ = v_mul(dh_, a_);                               \
        STORE(dg + j, gg_);                                                                      \
        STORE(du + j, gu_);                                                                      \
    } while (0)
#define GLU_ST(p, v) v_st(p, v)
#define GLU_STM(p, v) v_stm(p, msk, v)
#define GLU_BWD(BOTH)                                                                            \
    do {                                                                                         \
        int j = 0;                                                                               \
        for (; j + VL <= n; j += VL)                                                             \
            GLU_BWD_VEC(BOTH, v_ld(g + j), v_ld(u + j), v_ld(dh + j), GLU_ST);                   \
        if (j < n) {                                                                             \
            vm msk = v_tail(n - j);                                                              \
            GLU_BWD_VEC(BOTH, v_ldm(g + j, msk, v_zero()), v_ldm(u + j, msk, v_zero()),          \
                        v_ldm(dh + j, msk, v_zero()), GLU_STM);                                  \
        }                                                                                        \
    } while (0)

static void glu_bwd_row(attn_act act, int n, const float *g, const float *u, // (n)
                        const float *dh, float *dg, float *du) {             // (n)
    switch (act) {
    case ATTN_ACT_NONE: GLU_BWD(none_both); break;
    case ATTN_ACT_RELU: GLU_BWD(relu_both); break;
    case ATTN_ACT_GELU_TANH: GLU_BWD(gelu_tanh_both); break;
    case ATTN_ACT_GELU_ERF: GLU_BWD(gelu_erf_both); break;
    case ATTN_ACT_SILU: GLU_BWD(silu_both); break;
    }
}

void ATTN_FN(attn_glu_forward)(attn_act act, int N, int F, const float *g, int ldg, // (N, F)
                               const float *u, int ldu,                             // (N, F)
                               float *h, int ldh) {                                 // (N, F)
    /* (an exp or a tanh an element: a quarter of PAR_MIN_WORK pays the fork; a 16-slot SmolLM2
     * step's 16 x 1536 ran on one thread while the other waited, ~1.5% of its time) */
#pragma omp parallel for schedule(static) if ((size_t)N * F >= PAR_MIN_WORK / 4 && N > 1)
    for (int i = 0; i < N; i++)
        glu_fwd_row(act, F, g + (size_t)i * ldg, u + (size_t)i * ldu, h + (size_t)i * ldh);
}

void ATTN_FN(attn_glu_backward)(attn_act act, int N, int F, const float *g, int ldg, // (N, F)
                                const float *u, int ldu,                             // (N, F)
                                const float *dh, int ldh,                            // (N, F)
                                float *dg, int lddg, float *du, int lddu) {          // (N, F)
#pragma omp parallel for schedule(static) if ((size_t)N * F >= PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++)
        glu_bwd_row(act, F, g + (size_t)i * ldg, u + (size_t)i * ldu, dh + (size_t)i * ldh,
                    dg + (size_t)i * lddg, du + (size_t)i * lddu);
}

/* ---- RMSNorm ------------------------------------------------------------------------------- */

/* sum_j a[j] · b[j] over a row: float vector FMAs within SUM_BLOCK blocks, the block totals in
 * double (as layer norm's moments; a = b gives the sum of squares). */
static double row_dot(int C, const float *a, const float *b) { // (C)
    double total = 0;
    for (int k = 0; k < C; k += SUM_BLOCK) {
        int end = ATTN_MIN(C, k + SUM_BLOCK), j = k;
        vf s0 = v_zero(), s1 = v_zero();
        for (; j + 2 * VL <= end; j += 2 * VL) {
            s0 = v_fma(v_ld(a + j), v_ld(b + j), s0);
            s1 = v_fma(v_ld(a + j + VL), v_ld(b + j + VL), s1);
        }
        for (; j < end; j += VL) {
            vm msk = v_tail(ATTN_MIN(VL, end - j));
            s0 = v_fma(v_ldm(a + j, msk, v_zero()), v_ldm(b + j, msk, v_zero()), s0);
        }
        total += v_hsum(v_add(s0, s1));
    }
    return total;
}

void ATTN_FN(attn_rmsnorm_forward)(int N, int C, const float *x, // (N, C)
                                   const float *w,               // (C) or NULL
                                   float eps, float *y,          // (N, C), may be x
                                   float *rstd) {                // (N) or NULL
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C;
        float *yr = y + (size_t)i * C;
        const float rs = (float)(1.0 / sqrt(row_dot(C, xr, xr) / C + eps));
        const vf vrs = v_set(rs);
        int j = 0;
        /* (x · rstd) · w, two roundings as LlamaRMSNorm in float32; y may be x (the row's sum
         * is complete before the first store) */
        for (; j + VL <= C; j += VL) {
            vf v = v_mul(v_ld(xr + j), vrs);
            v_st(yr + j, w ? v_mul(v, v_ld(w + j)) : v);
        }
        if (j < C) {
            vm msk = v_tail(C - j);
            vf v = v_mul(v_ldm(xr + j, msk, v_zero()), vrs);
            v_stm(yr + j, msk, w ? v_mul(v, v_ldm(w + j, msk, v_zero())) : v);
        }
        if (rstd) rstd[i] = rs;
    }
}

/* dw over the columns [c0, c0 + width) (width <= 4 VL) in registers across all N rows: the
 * fallback when the per-thread buffers cannot be allocated (see layer norm's). */
#define RMS_COLS (4 * VL)
static void rms_param_grad_block(int N, int C, int c0, int width, const float *x, // (N, C)
                                 const float *rstd,                               // (N)
                                 const float *dy, float *dw) { // dy (N, C); dw (C)
    vf aw[4];
    vm msk[4];
    int nv = (width + VL - 1) / VL;
    for (int k = 0; k < 4; k++) {
        aw[k] = v_zero();
        msk[k] = v_tail(ATTN_MAX(0, ATTN_MIN(VL, width - k * VL)));
    }
    for (int i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C + c0, *dyr = dy + (size_t)i * C + c0;
        const vf rs = v_set(rstd[i]);
        for (int k = 0; k < nv; k++)
            aw[k] = v_fma(v_ldm(dyr + k * VL, msk[k], v_zero()),
                          v_mul(v_ldm(xr + k * VL, msk[k], v_zero()), rs), aw[k]);
    }
    for (int k = 0; k < nv; k++) {
        float *pw = dw + c0 + k * VL;
        v_stm(pw, msk[k], v_add(v_ldm(pw, msk[k], v_zero()), aw[k]));
    }
}

/* One row of dx = r (g − x · r² mean(g x)), g = dy w, r = rstd; if pw is not NULL, also
 * pw += dy x r (this thread's partial dw). dx may be dy: the second sweep reads each element
 * before writing it. */
static void rms_bwd_row(int C, const float *xr, const float *w, float rstd, // xr, w: (C)
                        const float *dyr, float *dxr, float *pw) {          // (C)
    double sgx = 0;
    for (int k = 0; k < C; k += SUM_BLOCK) {
        int end = ATTN_MIN(C, k + SUM_BLOCK), j = k;
        vf a0 = v_zero();
        for (; j + VL <= end; j += VL) {
            vf g = v_ld(dyr + j);
            if (w) g = v_mul(g, v_ld(w + j));
            a0 = v_fma(g, v_ld(xr + j), a0);
        }
        if (j < end) {
            vm msk = v_tail(end - j);
            vf g = v_ldm(dyr + j, msk, v_zero());
            if (w) g = v_mul(g, v_ldm(w + j, msk, v_zero()));
            a0 = v_fma(g, v_ldm(xr + j, msk, v_zero()), a0);
        }
        sgx += v_hsum(a0);
    }
    const vf rs = v_set(rstd), kk = v_set((float)((double)rstd * rstd * sgx / C));
    int j = 0;
    for (; j + VL <= C; j += VL) {
        vf d = v_ld(dyr + j), g = w ? v_mul(d, v_ld(w + j)) : d, xv = v_ld(xr + j);
        if (pw) v_st(pw + j, v_fma(d, v_mul(xv, rs), v_ld(pw + j)));
        v_st(dxr + j, v_mul(rs, v_fnma(xv, kk, g)));
    }
    if (j < C) {
        vm msk = v_tail(C - j);
        vf d = v_ldm(dyr + j, msk, v_zero());
        vf g = w ? v_mul(d, v_ldm(w + j, msk, v_zero())) : d, xv = v_ldm(xr + j, msk, v_zero());
        if (pw) v_stm(pw + j, msk, v_fma(d, v_mul(xv, rs), v_ldm(pw + j, msk, v_zero())));
        v_stm(dxr + j, msk, v_mul(rs, v_fnma(xv, kk, g)));
    }
}

/* dw is a sum over rows: per-thread (C) partials added in thread order afterwards, as layer
 * norm's backward does (no races; deterministic for a given thread count). */
void ATTN_FN(attn_rmsnorm_backward)(int N, int C, const float *x, // (N, C)
                                    const float *w,               // (C) or NULL
                                    const float *rstd,            // (N)
                                    const float *dy, float *dx,   // (N, C); dx may be dy
                                    float *dw) {                  // (C) or NULL
    const int par = (size_t)N * C >= PAR_MIN_WORK && N > 1;
    int nt = 1;
#ifdef _OPENMP
    if (par) nt = ATTN_MAX(1, ATTN_MIN(omp_get_max_threads(), N));
#endif
    const size_t stride = ((size_t)C + 15) & ~(size_t)15; /* 64 bytes apart: no false sharing */
    float *part = NULL;
    if (dw) {
        part = attn_calloc(sizeof(float) * stride * (size_t)nt);
        if (!part) { /* fallback: the weight gradient first, dx may alias dy */
            int nblk = (C + RMS_COLS - 1) / RMS_COLS;
#pragma omp parallel for schedule(static) if (par && nblk > 1)
            for (int k = 0; k < nblk; k++)
                rms_param_grad_block(N, C, k * RMS_COLS, ATTN_MIN(RMS_COLS, C - k * RMS_COLS), x,
                                     rstd, dy, dw);
        }
    }
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *pw = part ? part + stride * (size_t)tid : NULL;
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++)
            rms_bwd_row(C, x + (size_t)i * C, w, rstd[i], dy + (size_t)i * C, dx + (size_t)i * C,
                        pw);
    }
    if (part) {
        for (int t = 0; t < nt; t++) {
            const float *pw = part + stride * (size_t)t;
            for (int c = 0; c < C; c++) dw[c] += pw[c];
        }
        attn_free(part);
    }
}

/* ---- rotary position embeddings ------------------------------------------------------------ */

/* Each row's cos / sin vectors are loaded once and applied to all H heads. The interleaved mode
 * works on whole vectors of x: the (cos, sin) of pair i sit in lanes 2i and 2i + 1
 * (av_load_dup_pairs), the partner of each lane is av_swap_pairs(x), and one fmaddsub gives
 * x_e cos − x_o sin in the even lanes and x_o cos + x_e sin in the odd ones. */
void ATTN_FN(attn_rope_apply)(attn_rope_mode mode, int N, int H, int D, int R,
                              float *x, int ld,                       // (N, ld): H heads of D
                              const int32_t *pos,                     // (N)
                              const float *cos_t, const float *sin_t, // (P, R/2)
                              bool inverse) {
    const int half = R / 2;
    const vf sgn = v_set(inverse ? -1.0f : 1.0f); /* R(−θ): the sine changes sign */
#pragma omp parallel for schedule(static) if ((size_t)N * H * R >= PAR_MIN_WORK && N > 1)
    for (int n = 0; n < N; n++) {
        const float *cr = cos_t + (size_t)pos[n] * half, *sr = sin_t + (size_t)pos[n] * half;
        float *xr = x + (size_t)n * ld;
        if (mode == ATTN_ROPE_HALF) {
            for (int i = 0; i < half; i += VL) {
                const int wd = ATTN_MIN(VL, half - i);
                const vm msk = v_tail(wd);
                const bool full = wd == VL;
                const vf c = full ? v_ld(cr + i) : v_ldm(cr + i, msk, v_zero());
                const vf sn = v_mul(full ? v_ld(sr + i) : v_ldm(sr + i, msk, v_zero()), sgn);
                for (int h = 0; h < H; h++) {
                    float *pa = xr + (size_t)h * D + i, *pb = pa + half;
                    vf a = full ? v_ld(pa) : v_ldm(pa, msk, v_zero());
                    vf b = full ? v_ld(pb) : v_ldm(pb, msk, v_zero());
                    vf na = v_fnma(b, sn, v_mul(a, c)), nb = v_fma(a, sn, v_mul(b, c));
                    if (full) {
                        v_st(pa, na);
                        v_st(pb, nb);
                    } else {
                        v_stm(pa, msk, na);
                        v_stm(pb, msk, nb);
                    }
                }
            }
        } else {
            for (int j = 0; j < R; j += VL) {
                const int wd = ATTN_MIN(VL, R - j); /* even: R is */
                const vm msk = v_tail(wd);
                const bool full = wd == VL;
                const vf c = av_load_dup_pairs(cr + j / 2, wd / 2);
                const vf sn = v_mul(av_load_dup_pairs(sr + j / 2, wd / 2), sgn);
                for (int h = 0; h < H; h++) {
                    float *p = xr + (size_t)h * D + j;
                    vf v = full ? v_ld(p) : v_ldm(p, msk, v_zero());
                    vf o = av_fmaddsub(v, c, v_mul(av_swap_pairs(v), sn));
                    if (full)
                        v_st(p, o);
                    else
                        v_stm(p, msk, o);
                }
            }
        }
    }
}

/* ---- embedding ----------------------------------------------------------------------------- */

void ATTN_FN(attn_embedding_forward)(int N, int V, int C, const int32_t *ids, // (N)
                                     const float *table,                      // (V, C)
                                     float *out) {                            // (N, C)
    (void)V;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= 8 * (size_t)PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++)
        memcpy(out + (size_t)i * C, table + (size_t)ids[i] * C, sizeof(float) * (size_t)C);
}

/* Threads own disjoint column blocks of dtable and walk all N rows in order, so repeated ids
 * never race and every element is summed in the same order as the reference path (bitwise equal
 * results). EMB_COLS floats = 1 KiB per row segment keeps blocks on separate cache lines. */
#define EMB_COLS 256
void ATTN_FN(attn_embedding_backward)(int N, int V, int C, const int32_t *ids, // (N)
                                      const float *dout,                       // (N, C)
                                      float *dtable) {                         // (V, C)
    (void)V;
    int nblk = (C + EMB_COLS - 1) / EMB_COLS;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PAR_MIN_WORK && nblk > 1)
    for (int k = 0; k < nblk; k++) {
        int c0 = k * EMB_COLS, c1 = ATTN_MIN(C, c0 + EMB_COLS);
        for (int i = 0; i < N; i++) {
            float *t = dtable + (size_t)ids[i] * C;
            const float *g = dout + (size_t)i * C;
            int c = c0;
            for (; c + VL <= c1; c += VL) v_st(t + c, v_add(v_ld(t + c), v_ld(g + c)));
            if (c < c1) {
                vm msk = v_tail(c1 - c);
                v_stm(t + c, msk, v_add(v_ldm(t + c, msk, v_zero()), v_ldm(g + c, msk, v_zero())));
            }
        }
    }
}

/* ---- cross-entropy ------------------------------------------------------------------------- */

/* One kept row of cross-entropy; returns its loss (before the mean). With d = x - max:
 *   loss = log s - (1 - eps) d_t - eps/V sum_j d_j,   s = sum_j exp(d_j),
 * and, if g is not NULL, g_j = inv (exp(d_j)/s - eps/V) - inv (1 - eps) [j == t].
 * Passes: max; then exp(d) (stored into g as scratch), s and sum d together; then g scaled in
 * place. g may be x: x_t is read first and every pass reads an element before writing it. */
static double ce_row(int V, const float *x, int t, float eps, double inv, float *g) { // (V)
    const float m = row_max(V, x);
    const double dt = (double)x[t] - m;
    const vf vmx = v_set(m);
    double s = 0, sd = 0;
    for (int b = 0; b < V; b += SUM_BLOCK) {
        int end = ATTN_MIN(V, b + SUM_BLOCK), j = b;
        vf s0 = v_zero(), s1 = v_zero(), d0 = v_zero(), d1 = v_zero();
        for (; j + 2 * VL <= end; j += 2 * VL) {
            vf e0 = v_sub(v_ld(x + j), vmx), e1 = v_sub(v_ld(x + j + VL), vmx);
            d0 = v_add(d0, e0);
            d1 = v_add(d1, e1);
            e0 = v_exp(e0);
            e1 = v_exp(e1);
            if (g) {
                v_st(g + j, e0);
                v_st(g + j + VL, e1);
            }
            s0 = v_add(s0, e0);
            s1 = v_add(s1, e1);
        }
        for (; j < end; j += VL) {
            vm msk = v_tail(ATTN_MIN(VL, end - j));
            vf e = v_sub(v_ldm(x + j, msk, vmx), vmx); /* 0 past the end ... */
            d0 = v_add(d0, e);
            e = v_sel(msk, v_exp(e), v_zero()); /* ... and its exp masked to 0 */
            if (g) v_stm(g + j, msk, e);
            s0 = v_add(s0, e);
        }
        s += v_hsum(v_add(s0, s1));
        sd += v_hsum(v_add(d0, d1));
    }
    if (g) {
        const vf a = v_set((float)(inv / s)), c = v_set((float)(-inv * eps / V));
        int j = 0;
        for (; j + VL <= V; j += VL) v_st(g + j, v_fma(v_ld(g + j), a, c));
        if (j < V) {
            vm msk = v_tail(V - j);
            v_stm(g + j, msk, v_fma(v_ldm(g + j, msk, v_zero()), a, c));
        }
        g[t] -= (float)(inv * (1.0 - eps));
    }
    return log(s) - (1.0 - eps) * dt - (double)eps * sd / V;
}

void ATTN_FN(attn_cross_entropy)(int N, int V, const float *logits, // (N, V)
                                 const int32_t *targets,            // (N)
                                 int32_t ignore_index, float label_smoothing, float *loss,
                                 float *dlogits) {                  // (N, V) or NULL
    int kept = 0;
    for (int i = 0; i < N; i++) kept += targets[i] != ignore_index;
    const double inv = kept ? 1.0 / kept : 0.0;
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) \
    if ((size_t)N * V >= PAR_MIN_WORK && N > 1)
    for (int i = 0; i < N; i++) {
        float *g = dlogits ? dlogits + (size_t)i * V : NULL;
        if (targets[i] == ignore_index) {
            if (g) memset(g, 0, sizeof(float) * (size_t)V);
            continue;
        }
        total += ce_row(V, logits + (size_t)i * V, targets[i], label_smoothing, inv, g);
    }
    *loss = kept ? (float)(total * inv) : 0.0f;
}

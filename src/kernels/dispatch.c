/* dispatch.c — backend selection and the validating public entry points of attn_kernels.h. */
#include "kernels-impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_TABLE(sfx, ID)                                                                    \
    static const attn_kernel_table table_##sfx = {                                               \
        ID,                                                                                      \
        attn_gemm_##sfx,                                                                         \
        attn_softmax_forward_##sfx,                                                              \
        attn_softmax_backward_##sfx,                                                             \
        attn_log_softmax_forward_##sfx,                                                          \
        attn_layernorm_forward_##sfx,                                                            \
        attn_layernorm_backward_##sfx,                                                           \
        attn_act_forward_##sfx,                                                                  \
        attn_act_backward_##sfx,                                                                 \
        attn_rmsnorm_forward_##sfx,                                                              \
        attn_rmsnorm_backward_##sfx,                                                             \
        attn_rope_apply_##sfx,                                                                   \
        attn_glu_forward_##sfx,                                                                  \
        attn_glu_backward_##sfx,                                                                 \
        attn_embedding_forward_##sfx,                                                            \
        attn_embedding_backward_##sfx,                                                           \
        attn_cross_entropy_##sfx,                                                                \
        attn_attention_forward_##sfx,                                                            \
        attn_attention_backward_##sfx,                                                           \
    };

KERNEL_TABLE(ref, ATTN_BACKEND_REF)
KERNEL_TABLE(avx2, ATTN_BACKEND_AVX2)
KERNEL_TABLE(avx512, ATTN_BACKEND_AVX512)

static const attn_kernel_table *g_table = NULL;


bool attn_backend_available(attn_backend b) {
    switch (b) {
    case ATTN_BACKEND_AUTO:
    case ATTN_BACKEND_REF: return true;
#if defined(__x86_64__) || defined(__i386__)
    case ATTN_BACKEND_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case ATTN_BACKEND_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
#else
    default: return false;
#endif
    }
    return false;
}

const char *attn_backend_name(attn_backend b) {
    switch (b) {
    case ATTN_BACKEND_AUTO: return "auto";
    case ATTN_BACKEND_REF: return "ref";
    case ATTN_BACKEND_AVX2: return "avx2";
    case ATTN_BACKEND_AVX512: return "avx512";
    }
    return "unknown";
}

attn_status attn_backend_parse(const char *name, attn_backend *out) {
    static const attn_backend all[] = {ATTN_BACKEND_AUTO, ATTN_BACKEND_REF, ATTN_BACKEND_AVX2,
                                       ATTN_BACKEND_AVX512};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, attn_backend_name(all[i])) == 0) {
            *out = all[i];
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "unknown backend '%s' (expected auto, ref, avx2 or avx512)",
                     name ? name : "(null)");
}

static const attn_kernel_table *table_for(attn_backend b) {
    if (b == ATTN_BACKEND_AUTO)
        b = attn_backend_available(ATTN_BACKEND_AVX512) ? ATTN_BACKEND_AVX512
            : attn_backend_available(ATTN_BACKEND_AVX2) ? ATTN_BACKEND_AVX2
                                                        : ATTN_BACKEND_REF;
    switch (b) {
    case ATTN_BACKEND_AVX512: return &table_avx512;
    case ATTN_BACKEND_AVX2: return &table_avx2;
    default: return &table_ref;
    }
}

attn_status attn_set_backend(attn_backend b) {
    if (!attn_backend_available(b))
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "backend %s is not supported by this CPU",
                         attn_backend_name(b));
    g_table = table_for(b);
    return ATTN_STATUS_OK;
}

static _Atomic uint64_t g_multiply_adds;

void attn_kernels_count(int M, int N, int K) {
    atomic_fetch_add_explicit(&g_multiply_adds, (uint64_t)M * (uint64_t)N * (uint64_t)K,
                              memory_order_relaxed);
}

uint64_t attn_kernels_multiply_adds(void) {
    return atomic_load_explicit(&g_multiply_adds, memory_order_relaxed);
}

const attn_kernel_table *attn_kernels_current(void) {
    if (!g_table) {
        /* An unknown or unsupported ATTN_BACKEND falls back to auto; the CLI reports it. */
        attn_backend b = ATTN_BACKEND_AUTO;
        const char *env = getenv("ATTN_BACKEND");
        if (env && *env && attn_backend_parse(env, &b) == ATTN_STATUS_OK &&
            attn_backend_available(b))
            g_table = table_for(b);
        else
            g_table = table_for(ATTN_BACKEND_AUTO);
    }
    return g_table;
}

attn_backend attn_get_backend(void) { return attn_kernels_current()->id; }

/* ---- validation ------------------------------------------------------------------------- */

#define REQUIRE(cond, ...)                                                                       \
    do {                                                                                         \
        if (!(cond)) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, __VA_ARGS__);                \
    } while (0)

static bool valid_act(attn_act a) { return a >= ATTN_ACT_NONE && a <= ATTN_ACT_SILU; }

attn_status attn_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc, const float *bias, attn_act act) {
    return attn_gemm_precision(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                               bias, act, ATTN_PRECISION_F32);
}

attn_status attn_gemm_precision(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                const float *A, int lda, const float *B, int ldb, float beta,
                                float *C, int ldc, const float *bias, attn_act act,
                                attn_precision precision) {
    ATTN_TRY(attn_precision_check(precision, "gemm"));
    REQUIRE(M >= 0 && N >= 0 && K >= 0, "gemm: sizes must be >= 0 (M=%d N=%d K=%d)", M, N, K);
    REQUIRE(valid_act(act), "gemm: unknown activation %d", (int)act);
    REQUIRE(lda >= ATTN_MAX(1, trans_a ? M : K), "gemm: lda=%d < %d", lda, trans_a ? M : K);
    REQUIRE(ldb >= ATTN_MAX(1, trans_b ? K : N), "gemm: ldb=%d < %d", ldb, trans_b ? K : N);
    REQUIRE(ldc >= ATTN_MAX(1, N), "gemm: ldc=%d < N=%d", ldc, N);
    if (M == 0 || N == 0) return ATTN_STATUS_OK;
    REQUIRE(C && (K == 0 || (A && B)), "gemm: NULL matrix");
    attn_kernels_count(M, N, K);
    if (precision == ATTN_PRECISION_F32)
        attn_kernels_current()->gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                     ldc, bias, act);
    else if (attn_get_backend() == ATTN_BACKEND_AVX512)
        attn_gemm_bf16_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias,
                              act);
    else
        attn_gemm_bf16_ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, act);
    return ATTN_STATUS_OK;
}

attn_status attn_softmax_forward(int N, int D, const float *x, float *y) {
    REQUIRE(N >= 0 && D > 0, "softmax: need N >= 0 and D > 0 (N=%d D=%d)", N, D);
    REQUIRE(N == 0 || (x && y), "softmax: NULL tensor");
    if (N) attn_kernels_current()->softmax_forward(N, D, x, y);
    return ATTN_STATUS_OK;
}

attn_status attn_softmax_backward(int N, int D, const float *y, const float *dy, float *dx) {
    REQUIRE(N >= 0 && D > 0, "softmax backward: need N >= 0 and D > 0 (N=%d D=%d)", N, D);
    REQUIRE(N == 0 || (y && dy && dx), "softmax backward: NULL tensor");
    if (N) attn_kernels_current()->softmax_backward(N, D, y, dy, dx);
    return ATTN_STATUS_OK;
}

attn_status attn_log_softmax_forward(int N, int D, const float *x, float *y) {
    REQUIRE(N >= 0 && D > 0, "log_softmax: need N >= 0 and D > 0 (N=%d D=%d)", N, D);
    REQUIRE(N == 0 || (x && y), "log_softmax: NULL tensor");
    if (N) attn_kernels_current()->log_softmax_forward(N, D, x, y);
    return ATTN_STATUS_OK;
}

attn_status attn_layernorm_forward(int N, int C, const float *x, const float *w, const float *b,
                                   float eps, float *y, float *mean, float *rstd) {
    REQUIRE(N >= 0 && C > 0, "layernorm: need N >= 0 and C > 0 (N=%d C=%d)", N, C);
    REQUIRE(eps >= 0 && isfinite(eps), "layernorm: eps must be finite and >= 0");
    REQUIRE(N == 0 || (x && y), "layernorm: NULL tensor");
    if (N) attn_kernels_current()->layernorm_forward(N, C, x, w, b, eps, y, mean, rstd);
    return ATTN_STATUS_OK;
}

attn_status attn_layernorm_backward(int N, int C, const float *x, const float *w,
                                    const float *mean, const float *rstd, const float *dy,
                                    float *dx, float *dw, float *db) {
    REQUIRE(N >= 0 && C > 0, "layernorm backward: need N >= 0 and C > 0 (N=%d C=%d)", N, C);
    REQUIRE(N == 0 || (x && mean && rstd && dy && dx), "layernorm backward: NULL tensor");
    if (N) attn_kernels_current()->layernorm_backward(N, C, x, w, mean, rstd, dy, dx, dw, db);
    return ATTN_STATUS_OK;
}

attn_status attn_act_forward(attn_act act, size_t n, const float *x, float *y) {
    REQUIRE(valid_act(act), "activation: unknown activation %d", (int)act);
    REQUIRE(n == 0 || (x && y), "activation: NULL tensor");
    if (n) attn_kernels_current()->act_forward(act, n, x, y);
    return ATTN_STATUS_OK;
}

attn_status attn_act_backward(attn_act act, size_t n, const float *x, const float *dy,
                              float *dx) {
    REQUIRE(valid_act(act), "activation backward: unknown activation %d", (int)act);
    REQUIRE(n == 0 || (x && dy && dx), "activation backward: NULL tensor");
    if (n) attn_kernels_current()->act_backward(act, n, x, dy, dx);
    return ATTN_STATUS_OK;
}

attn_status attn_rmsnorm_forward(int N, int C, const float *x, const float *w, float eps,
                                 float *y, float *rstd) {
    REQUIRE(N >= 0 && C > 0, "rmsnorm: need N >= 0 and C > 0 (N=%d C=%d)", N, C);
    REQUIRE(eps >= 0 && isfinite(eps), "rmsnorm: eps must be finite and >= 0");
    REQUIRE(N == 0 || (x && y), "rmsnorm: NULL tensor");
    if (N) attn_kernels_current()->rmsnorm_forward(N, C, x, w, eps, y, rstd);
    return ATTN_STATUS_OK;
}

attn_status attn_rmsnorm_backward(int N, int C, const float *x, const float *w, const float *rstd,
                                  const float *dy, float *dx, float *dw) {
    REQUIRE(N >= 0 && C > 0, "rmsnorm backward: need N >= 0 and C > 0 (N=%d C=%d)", N, C);
    REQUIRE(N == 0 || (x && rstd && dy && dx), "rmsnorm backward: NULL tensor");
    if (N) attn_kernels_current()->rmsnorm_backward(N, C, x, w, rstd, dy, dx, dw);
    return ATTN_STATUS_OK;
}

attn_status attn_rope_apply(attn_rope_mode mode, int N, int H, int D, int R, float *x, int ld,
                            const int32_t *pos, int P, const float *cos_t, const float *sin_t,
                            bool inverse) {
    REQUIRE(mode == ATTN_ROPE_HALF || mode == ATTN_ROPE_INTERLEAVED, "rope: unknown mode %d",
            (int)mode);
    REQUIRE(N >= 0 && H > 0 && D > 0, "rope: need N >= 0, H > 0 and D > 0 (N=%d H=%d D=%d)", N, H,
            D);
    REQUIRE(R >= 2 && R <= D && R % 2 == 0,
            "rope: the rotary width R=%d must be even and in [2, D=%d]", R, D);
    REQUIRE((long long)H * D <= INT32_MAX, "rope: H*D overflows (H=%d D=%d)", H, D);
    REQUIRE(ld >= H * D, "rope: row stride ld=%d < H*D=%d", ld, H * D);
    REQUIRE(P > 0, "rope: need P > 0 table positions (P=%d)", P);
    if (N == 0) return ATTN_STATUS_OK;
    REQUIRE(x && pos && cos_t && sin_t, "rope: NULL tensor");
    for (int n = 0; n < N; n++)
        REQUIRE(pos[n] >= 0 && pos[n] < P, "rope: position %d of row %d is outside [0, P=%d)",
                (int)pos[n], n, P);
    attn_kernels_current()->rope_apply(mode, N, H, D, R, x, ld, pos, cos_t, sin_t, inverse);
    return ATTN_STATUS_OK;
}

attn_status attn_rope_tables(int P, int R, const float *inv_freq, float *cos_t, float *sin_t) {
    REQUIRE(P >= 0, "rope tables: need P >= 0 (P=%d)", P);
    REQUIRE(R >= 2 && R % 2 == 0, "rope tables: the rotary width R=%d must be even and >= 2", R);
    REQUIRE((size_t)P * (size_t)(R / 2) <= SIZE_MAX / sizeof(float),
            "rope tables: P*R/2 overflows (P=%d R=%d)", P, R);
    if (P == 0) return ATTN_STATUS_OK;
    REQUIRE(inv_freq && cos_t && sin_t, "rope tables: NULL tensor");
    attn_rope_tables_impl(P, R, inv_freq, cos_t, sin_t);
    return ATTN_STATUS_OK;
}

/* An output may share memory with an input only element for element: the same pointer with the
 * same row stride (the kernels read every input of a vector before writing its outputs). */
static bool same_or_apart(const void *out, int ld_out, const void *in, int ld_in) {
    return out != in || ld_out == ld_in;
}

attn_status attn_glu_forward(attn_act act, int N, int F, const float *g, int ldg, const float *u,
                             int ldu, float *h, int ldh) {
    REQUIRE(valid_act(act), "glu: unknown activation %d", (int)act);
    REQUIRE(N >= 0 && F > 0, "glu: need N >= 0 and F > 0 (N=%d F=%d)", N, F);
    REQUIRE(ldg >= F && ldu >= F && ldh >= F,
            "glu: row strides must be >= F=%d (ldg=%d ldu=%d ldh=%d)", F, ldg, ldu, ldh);
    if (N == 0) return ATTN_STATUS_OK;
    REQUIRE(g && u && h, "glu: NULL tensor");
    REQUIRE(same_or_apart(h, ldh, g, ldg) && same_or_apart(h, ldh, u, ldu),
            "glu: h may equal g or u only with the same row stride");
    attn_kernels_current()->glu_forward(act, N, F, g, ldg, u, ldu, h, ldh);
    return ATTN_STATUS_OK;
}

attn_status attn_glu_backward(attn_act act, int N, int F, const float *g, int ldg, const float *u,
                              int ldu, const float *dh, int ldh, float *dg, int lddg, float *du,
                              int lddu) {
    REQUIRE(valid_act(act), "glu backward: unknown activation %d", (int)act);
    REQUIRE(N >= 0 && F > 0, "glu backward: need N >= 0 and F > 0 (N=%d F=%d)", N, F);
    REQUIRE(ldg >= F && ldu >= F && ldh >= F && lddg >= F && lddu >= F,
            "glu backward: row strides must be >= F=%d (ldg=%d ldu=%d ldh=%d lddg=%d lddu=%d)", F,
            ldg, ldu, ldh, lddg, lddu);
    if (N == 0) return ATTN_STATUS_OK;
    REQUIRE(g && u && dh && dg && du, "glu backward: NULL tensor");
    REQUIRE(dg != du, "glu backward: dg and du must be different tensors");
    REQUIRE(same_or_apart(dg, lddg, g, ldg) && same_or_apart(dg, lddg, u, ldu) &&
                same_or_apart(dg, lddg, dh, ldh) && same_or_apart(du, lddu, g, ldg) &&
                same_or_apart(du, lddu, u, ldu) && same_or_apart(du, lddu, dh, ldh),
            "glu backward: an output may equal an input only with the same row stride");
    attn_kernels_current()->glu_backward(act, N, F, g, ldg, u, ldu, dh, ldh, dg, lddg, du, lddu);
    return ATTN_STATUS_OK;
}

static attn_status check_ids(const char *what, int N, int V, const int32_t *ids) {
    for (int i = 0; i < N; i++)
        REQUIRE(ids[i] >= 0 && ids[i] < V, "%s: token id %d at position %d is outside [0, %d)",
                what, (int)ids[i], i, V);
    return ATTN_STATUS_OK;
}

attn_status attn_embedding_forward(int N, int V, int C, const int32_t *ids, const float *table,
                                   float *out) {
    REQUIRE(N >= 0 && V > 0 && C > 0, "embedding: need N >= 0, V > 0, C > 0 (N=%d V=%d C=%d)",
            N, V, C);
    REQUIRE(N == 0 || (ids && table && out), "embedding: NULL tensor");
    attn_status s = check_ids("embedding", N, V, ids);
    if (s) return s;
    if (N) attn_kernels_current()->embedding_forward(N, V, C, ids, table, out);
    return ATTN_STATUS_OK;
}

attn_status attn_embedding_backward(int N, int V, int C, const int32_t *ids, const float *dout,
                                    float *dtable) {
    REQUIRE(N >= 0 && V > 0 && C > 0,
            "embedding backward: need N >= 0, V > 0, C > 0 (N=%d V=%d C=%d)", N, V, C);
    REQUIRE(N == 0 || (ids && dout && dtable), "embedding backward: NULL tensor");
    attn_status s = check_ids("embedding backward", N, V, ids);
    if (s) return s;
    if (N) attn_kernels_current()->embedding_backward(N, V, C, ids, dout, dtable);
    return ATTN_STATUS_OK;
}

attn_status attn_cross_entropy(int N, int V, const float *logits, const int32_t *targets,
                               int32_t ignore_index, float label_smoothing, float *loss,
                               float *dlogits) {
    REQUIRE(N >= 0 && V > 0, "cross_entropy: need N >= 0 and V > 0 (N=%d V=%d)", N, V);
    REQUIRE(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
            "cross_entropy: label_smoothing must be in [0, 1], got %g", (double)label_smoothing);
    REQUIRE(loss && (N == 0 || (logits && targets)), "cross_entropy: NULL tensor");
    for (int i = 0; i < N; i++)
        REQUIRE(targets[i] == ignore_index || (targets[i] >= 0 && targets[i] < V),
                "cross_entropy: target %d at row %d is outside [0, %d)", (int)targets[i], i, V);
    if (N == 0) {
        *loss = 0.0f;
        return ATTN_STATUS_OK;
    }
    attn_kernels_current()->cross_entropy(N, V, logits, targets, ignore_index, label_smoothing,
                                          loss, dlogits);
    return ATTN_STATUS_OK;
}

attn_attention_params attn_attention_default_params(int B, int H, int Tq, int Tk, int D) {
    attn_attention_params p;
    memset(&p, 0, sizeof p);
    p.B = B;
    p.H = H;
    p.Tq = Tq;
    p.Tk = Tk;
    p.D = D;
    p.scale = D > 0 ? 1.0f / sqrtf((float)D) : 1.0f;
    /* H·D in 64 bits: an absurd H or D must reach check_attention as an error, not overflow. */
    long long hd = (long long)H * (long long)D;
    p.ldq = p.ldk = p.ldv = p.ldo = hd > INT32_MAX ? INT32_MAX : (int)hd;
    return p;
}

/* Offsets handed to the kernels are ptrdiff_t counts of floats: every reachable offset must
 * stay within this (in magnitude), so that neither the index arithmetic nor the addresses overflow. */
#define ATTN_MAX_OFFSET ((size_t)PTRDIFF_MAX / sizeof(float))

/* |x| as size_t, exact even for PTRDIFF_MIN. */
static size_t stride_mag(ptrdiff_t x) { return x < 0 ? (size_t)0 - (size_t)x : (size_t)x; }

/* Whether Σ (n_i − 1)·|s_i| + last, over the (n, s) pairs, stays within ATTN_MAX_OFFSET. */
static bool offsets_fit(int count, const int *n, const ptrdiff_t *s, size_t last) {
    size_t total = last;
    for (int i = 0; i < count; i++) {
        size_t t;
        if (!attn_size_mul((size_t)(n[i] - 1), stride_mag(s[i]), &t) ||
            !attn_size_add(total, t, &total))
            return false;
    }
    return total <= ATTN_MAX_OFFSET;
}

/* A batch stride (0: packed, T·ld) of a (B, T, width) tensor with row stride ld: batches must not
 * overlap (|sb| >= (T − 1)·ld + width, so that the backward's gradient rows of different batches
 * never share an address) and every offset must fit. Either sign is allowed. */
static attn_status check_batch_stride(const char *what, const char *name, ptrdiff_t sb, int B,
                                      int T, int ld, int width) {
    const ptrdiff_t eff = sb ? sb : (ptrdiff_t)T * ld;
    const size_t span = (size_t)(T - 1) * (size_t)ld + (size_t)width; /* one batch's extent */
    REQUIRE(sb == 0 || B == 1 || stride_mag(sb) >= span,
            "%s: %s=%td overlaps the previous batch (|%s| must be 0 or >= (T-1)*ld+width=%zu)",
            what, name, sb, name, span);
    const int n[1] = {B};
    const ptrdiff_t st[1] = {eff};
    REQUIRE(offsets_fit(1, n, st, span), "%s: %s=%td: tensor offsets overflow", what, name, sb);
    return ATTN_STATUS_OK;
}

static attn_status check_attention(const char *what, const attn_attention_params *p) {
    REQUIRE(p, "%s: NULL params", what);
    REQUIRE(p->B > 0 && p->H > 0 && p->Tq > 0 && p->Tk > 0 && p->D > 0,
            "%s: sizes must be > 0 (B=%d H=%d Tq=%d Tk=%d D=%d)", what, p->B, p->H, p->Tq, p->Tk,
            p->D);
    size_t hd;
    REQUIRE(attn_size_mul((size_t)p->H, (size_t)p->D, &hd) && hd <= INT32_MAX,
            "%s: H*D overflows (H=%d D=%d)", what, p->H, p->D);
    REQUIRE(p->H_kv >= 0 && p->H_kv <= p->H && (p->H_kv == 0 || p->H % p->H_kv == 0),
            "%s: H_kv=%d must be 0 (meaning H) or a divisor of H=%d", what, p->H_kv, p->H);
    const size_t kvd = (size_t)(p->H_kv ? p->H_kv : p->H) * (size_t)p->D; /* <= hd */
    REQUIRE(p->ldq >= (int)hd && p->ldo >= (int)hd,
            "%s: row strides ldq, ldo must be >= H*D=%zu (ldq=%d ldo=%d)", what, hd, p->ldq,
            p->ldo);
    REQUIRE(p->ldk >= (int)kvd && p->ldv >= (int)kvd,
            "%s: row strides ldk, ldv must be >= H_kv*D=%zu (ldk=%d ldv=%d)", what, kvd, p->ldk,
            p->ldv);
    size_t n;
    REQUIRE(attn_size_mul((size_t)p->B * (size_t)ATTN_MAX(p->Tq, p->Tk),
                          (size_t)ATTN_MAX(ATTN_MAX(p->ldq, p->ldk), ATTN_MAX(p->ldv, p->ldo)),
                          &n) &&
                n <= SIZE_MAX / sizeof(float),
            "%s: tensor size overflows", what);
    attn_status s;
    if ((s = check_batch_stride(what, "sbq", p->sbq, p->B, p->Tq, p->ldq, (int)hd)) ||
        (s = check_batch_stride(what, "sbk", p->sbk, p->B, p->Tk, p->ldk, (int)kvd)) ||
        (s = check_batch_stride(what, "sbv", p->sbv, p->B, p->Tk, p->ldv, (int)kvd)) ||
        (s = check_batch_stride(what, "sbo", p->sbo, p->B, p->Tq, p->ldo, (int)hd)))
        return s;
    REQUIRE(isfinite(p->scale), "%s: scale must be finite", what);
    REQUIRE(p->window >= 0, "%s: window=%d must be >= 0 (0: no sliding window)", what, p->window);
    REQUIRE(p->window == 0 || p->causal, "%s: a sliding window (window=%d) needs causal", what,
            p->window);
    if (p->kt || p->kt16) {
        REQUIRE(p->ldkt >= (ptrdiff_t)p->Tk + 16, "%s: ldkt=%td must be >= Tk + 16 = %d", what,
                p->ldkt, p->Tk + 16);
        REQUIRE(p->sbkt == 0 || p->sbkt >= (ptrdiff_t)kvd * p->ldkt || p->B == 1,
                "%s: sbkt=%td must be 0 or >= H_kv*D*ldkt", what, p->sbkt);
    }
    if (p->kv_len)
        for (int b = 0; b < p->B; b++)
            REQUIRE(p->kv_len[b] >= 0 && p->kv_len[b] <= p->Tk,
                    "%s: kv_len[%d]=%d is outside [0, Tk=%d]", what, b, (int)p->kv_len[b], p->Tk);
    if (p->bias) {
        /* Strides of any sign (0 shares the bias; bias_sq = -1 reads a relative-position vector
         * as a Toeplitz matrix); only the offsets' range can be checked. */
        const int dims[3] = {p->B, p->H, p->Tq};
        const ptrdiff_t st[3] = {p->bias_sb, p->bias_sh, p->bias_sq};
        REQUIRE(offsets_fit(3, dims, st, (size_t)p->Tk),
                "%s: bias strides overflow (bias_sb=%td bias_sh=%td bias_sq=%td)", what,
                p->bias_sb, p->bias_sh, p->bias_sq);
    }
    return ATTN_STATUS_OK;
}

attn_status attn_attention_forward(const attn_attention_params *p, const float *q,
                                   const float *k, const float *v, float *o, float *lse,
                                   float *probs) {
    attn_status s = check_attention("attention", p);
    if (s) return s;
    REQUIRE(q && k && v && o, "attention: NULL tensor");
    if (probs) {
        size_t n;
        REQUIRE(attn_size_mul((size_t)p->B * (size_t)p->H, (size_t)p->Tq * (size_t)p->Tk, &n) &&
                    n <= SIZE_MAX / sizeof(float),
                "attention: probabilities (B, H, Tq, Tk) overflow");
    }
    attn_kernels_current()->attention_forward(p, q, k, v, o, lse, probs);
    return ATTN_STATUS_OK;
}

attn_status attn_attention_backward(const attn_attention_params *p, const float *q,
                                    const float *k, const float *v, const float *o,
                                    const float *lse, const float *do_, float *dq, float *dk,
                                    float *dv) {
    attn_status s = check_attention("attention backward", p);
    if (s) return s;
    REQUIRE(q && k && v && o && lse && do_ && dq && dk && dv, "attention backward: NULL tensor");
    REQUIRE(!p->dbias || p->bias, "attention backward: dbias is set but bias is NULL");
    if (p->dbias) {
        size_t n;
        REQUIRE(attn_size_mul((size_t)p->B * (size_t)p->H, (size_t)p->Tq * (size_t)p->Tk, &n) &&
                    n <= ATTN_MAX_OFFSET,
                "attention backward: dbias (B, H, Tq, Tk) overflows");
    }
    attn_kernels_current()->attention_backward(p, q, k, v, o, lse, do_, dq, dk, dv);
    return ATTN_STATUS_OK;
}

/* ---- pre-packed B (gemm_simd.c, gemm_ref.c) ------------------------------------------------ */

#define PB_DECLARE(sfx)                                                                          \
    size_t attn_gemm_pb_floats_##sfx(int K, int N);                                              \
    void attn_gemm_pb_pack_##sfx(bool trans_b, int K, int N, const float *B, int ldb, float *P); \
    void attn_gemm_pb_run_##sfx(bool trans_a, int M, int N, int K, float alpha, const float *A,  \
                                int lda, const float *P, float beta, float *C, int ldc,          \
                                const float *bias, attn_act act);
PB_DECLARE(ref)
PB_DECLARE(avx2)
PB_DECLARE(avx512)

bool attn_precision_available(attn_precision p) {
    switch (p) {
    case ATTN_PRECISION_F32: return true;
    case ATTN_PRECISION_BF16: {
        const attn_backend be = attn_get_backend();
        return be == ATTN_BACKEND_REF || (be == ATTN_BACKEND_AVX512 && attn_cpu_has_avx512_bf16());
    }
    }
    return false;
}

attn_status attn_precision_check(attn_precision p, const char *what) {
    if (p != ATTN_PRECISION_F32 && p != ATTN_PRECISION_BF16)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: unknown precision %d", what, (int)p);
    if (!attn_precision_available(p))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: precision %s needs a CPU with AVX512-BF16 (backend %s)", what,
                         attn_precision_name(p), attn_backend_name(attn_get_backend()));
    return ATTN_STATUS_OK;
}

const char *attn_precision_name(attn_precision p) {
    switch (p) {
    case ATTN_PRECISION_F32: return "f32";
    case ATTN_PRECISION_BF16: return "bf16";
    }
    return "?";
}

attn_status attn_precision_parse(const char *name, attn_precision *out) {
    REQUIRE(name && out, "precision: NULL argument");
    if (!strcmp(name, "f32") || !strcmp(name, "fp32") || !strcmp(name, "float32"))
        *out = ATTN_PRECISION_F32;
    else if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16"))
        *out = ATTN_PRECISION_BF16;
    else
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "unknown precision '%s' (expected f32 or bf16)", name);
    return ATTN_STATUS_OK;
}

attn_status attn_gemm_pack_b(bool trans_b, int K, int N, const float *B, int ldb,
                             attn_gemm_packed_b *out) {
    return attn_gemm_pack_b_precision(trans_b, K, N, B, ldb, ATTN_PRECISION_F32, out);
}

attn_status attn_gemm_pack_b_precision(bool trans_b, int K, int N, const float *B, int ldb,
                                       attn_precision precision, attn_gemm_packed_b *out) {
    REQUIRE(out, "gemm pack: NULL output");
    memset(out, 0, sizeof *out);
    REQUIRE(K >= 0 && N >= 0, "gemm pack: sizes must be >= 0 (K=%d N=%d)", K, N);
    REQUIRE(ldb >= ATTN_MAX(1, trans_b ? K : N), "gemm pack: ldb=%d < %d", ldb, trans_b ? K : N);
    REQUIRE(B || K == 0 || N == 0, "gemm pack: NULL matrix");
    ATTN_TRY(attn_precision_check(precision, "gemm pack"));
    const attn_backend be = attn_get_backend();
    if (precision == ATTN_PRECISION_BF16) {
        const size_t n16 = attn_bf16_elems(K, N);
        if (n16 > ATTN_MAX_BUFFER_BYTES / sizeof(uint16_t))
            return attn_fail(ATTN_STATUS_TOO_LARGE, "gemm pack: K=%d N=%d is too large", K, N);
        const size_t nw = (n16 + 1) / 2;
        float *p = attn_alloc(nw * sizeof(float));
        if (!p)
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gemm pack: out of memory (K=%d N=%d)", K,
                             N);
        attn_gemm_bf16_pack(trans_b, K, N, B, ldb, (uint16_t *)(void *)p);
        out->K = K, out->N = N, out->backend = be, out->precision = precision;
        out->n_floats = nw, out->data = p;
        return ATTN_STATUS_OK;
    }
    const size_t n = be == ATTN_BACKEND_AVX512 ? attn_gemm_pb_floats_avx512(K, N)
                     : be == ATTN_BACKEND_AVX2 ? attn_gemm_pb_floats_avx2(K, N)
                                               : attn_gemm_pb_floats_ref(K, N);
    if (n > ATTN_MAX_BUFFER_BYTES / sizeof(float))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "gemm pack: K=%d N=%d is too large", K, N);
    float *p = attn_alloc(n * sizeof(float));
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gemm pack: out of memory (K=%d N=%d)", K, N);
    if (K > 0 && N > 0) {
        if (be == ATTN_BACKEND_AVX512)
            attn_gemm_pb_pack_avx512(trans_b, K, N, B, ldb, p);
        else if (be == ATTN_BACKEND_AVX2)
            attn_gemm_pb_pack_avx2(trans_b, K, N, B, ldb, p);
        else
            attn_gemm_pb_pack_ref(trans_b, K, N, B, ldb, p);
    }
    out->K = K, out->N = N, out->backend = be, out->n_floats = n, out->data = p;
    return ATTN_STATUS_OK;
}

void attn_gemm_packed_b_free(attn_gemm_packed_b *p) {
    if (!p) return;
    attn_free(p->data);
    memset(p, 0, sizeof *p);
}

attn_status attn_gemm_packed(bool trans_a, int M, int N, int K, float alpha, const float *A,
                             int lda, const attn_gemm_packed_b *B, float beta, float *C, int ldc,
                             const float *bias, attn_act act) {
    REQUIRE(M >= 0 && N >= 0 && K >= 0, "gemm packed: sizes must be >= 0 (M=%d N=%d K=%d)", M, N,
            K);
    REQUIRE(valid_act(act), "gemm packed: unknown activation %d", (int)act);
    REQUIRE(B && B->data, "gemm packed: B is not packed (attn_gemm_pack_b)");
    REQUIRE(B->K == K && B->N == N, "gemm packed: B was packed as (K=%d, N=%d), the call has K=%d N=%d",
            B->K, B->N, K, N);
    const attn_backend be = attn_get_backend();
    REQUIRE(B->backend == be, "gemm packed: B was packed for backend %s, the current one is %s",
            attn_backend_name(B->backend), attn_backend_name(be));
    REQUIRE(lda >= ATTN_MAX(1, trans_a ? M : K), "gemm packed: lda=%d < %d", lda, trans_a ? M : K);
    REQUIRE(ldc >= ATTN_MAX(1, N), "gemm packed: ldc=%d < N=%d", ldc, N);
    if (M == 0 || N == 0) return ATTN_STATUS_OK;
    REQUIRE(C && (K == 0 || A), "gemm packed: NULL matrix");
    attn_kernels_count(M, N, K);
    if (B->precision == ATTN_PRECISION_BF16) {
        const uint16_t *P = (const uint16_t *)(const void *)B->data;
        if (be == ATTN_BACKEND_AVX512)
            attn_gemm_bf16_run_avx512(trans_a, M, N, K, alpha, A, lda, P, beta, C, ldc, bias, act);
        else
            attn_gemm_bf16_run_ref(trans_a, M, N, K, alpha, A, lda, P, beta, C, ldc, bias, act);
        return ATTN_STATUS_OK;
    }
    if (be == ATTN_BACKEND_AVX512)
        attn_gemm_pb_run_avx512(trans_a, M, N, K, alpha, A, lda, B->data, beta, C, ldc, bias, act);
    else if (be == ATTN_BACKEND_AVX2)
        attn_gemm_pb_run_avx2(trans_a, M, N, K, alpha, A, lda, B->data, beta, C, ldc, bias, act);
    else
        attn_gemm_pb_run_ref(trans_a, M, N, K, alpha, A, lda, B->data, beta, C, ldc, bias, act);
    return ATTN_STATUS_OK;
}

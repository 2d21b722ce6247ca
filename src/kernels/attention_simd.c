/* attention_simd.c — fused, tiled scaled-dot-product attention (FlashAttention-2 style), forward
 * and backward, for AVX-512 and AVX2 + FMA with OpenMP. Compiled twice (ATTN_ISA = 512 and 2);
 * ATTN_FN appends the ISA suffix.
 *
 * Algorithm (forward). For each (batch b, head h, block of Br queries) — the unit of parallel
 * work — the query block is packed transposed and pre-scaled into Qt (D, Br) (so vector lanes run
 * over queries), then the visible key blocks of Bc keys are visited in order:
 *     St (Bc, Br) = K_j · Qt              scores, log2 domain (Q pre-scaled by scale·log2 e)
 *     mask the tile if it straddles the causal diagonal or a sliding window's edge (other masks
 *     just shorten the key range)
 *     St += bias tile · log2 e            (with a score bias: read transposed, may hold -inf)
 *     m' = max(m, colmax St); Pt = 2^(St − m'); l = l·2^(m − m') + colsum Pt
 *     Ot (D, Br) = Ot · 2^(m − m') + V_jᵀ · Pt
 * and at the end O = Otᵀ / l, lse = (m + log2 l)·ln 2. Every reduction over keys is a vertical
 * vector operation because lanes are queries. Key blocks past the last visible key of the query
 * block (causal or kv_len), and with a sliding window those before the first query's window,
 * are never touched (the key range of a block starts at that window's start). No Tq×Tk buffer
 * exists: all tiles are per-thread stack arrays of bounded size. The attention probabilities, when asked for, are written by a
 * second pass over the same tiles (St recomputed, 2^(St − lse2)), which reproduces the forward's
 * scores bit for bit, so they agree with o and lse.
 *
 * Algorithm (backward). One thread owns a whole (b, K/V head g) with the query heads of its
 * group — so dK, dV of that K/V head and dQ of those heads have a single writer and no atomics
 * or reductions are needed. For each query head h of the group and each query block (packed
 * once: Qt, dOt transposed, Q and dO rows), Di = rowsum(dO ∘ O); for each visible key block:
 *     St = K_j · Qt, Pt = 2^(St − lse2)   (recomputed; lse2 = lse·log2 e, +inf for empty rows)
 *     dPt = V_j · dOt, dSt = Pt ∘ (dPt − D) · scale   (dbias = Pt ∘ (dPt − D), if asked for)
 *     dV_j += Pt · dO,  dK_j += dSt · Q,  dQ_i += dStᵀ · K_j
 * with dK, dV accumulated in the output arrays (zeroed once per item, summed over the group's
 * heads) and dQ_i in a tile.
 *
 * Grouped-query attention reads K/V head h / (H / H_kv) in place (no copies); batch strides only
 * move the per-batch base pointers. A row whose visible scores are all -inf (a bias mask) ends
 * with l = 0 and is treated like a row without a visible key: o = 0, lse = -inf, P = 0.
 *
 * All seven products go through one register-blocked micro-kernel, C (R rows, NV vectors) +=
 * Σ_k bcast(A[r, k]) · B[k, :], instantiated for the (R, NV) shapes that fit the register file
 * (it runs at ~95% of the FMA peak on L1/L2-resident tiles). Tiles that straddle the causal
 * diagonal are processed in 16-key / 16-query groups that skip the all-masked part (see
 * key_rows_gemm); everything skipped has probability exactly 0, so results are unchanged.
 *
 * Invariants: head sizes D <= ATTN_SIMD_DMAX use the tiled path (larger D falls back to the
 * reference kernels, single-threaded); only the H·D (K/V: H_kv·D) columns of each row and the
 * Tq (Tk) rows of each batch are read or written
 * (masked tail vectors when D is not a multiple of the vector length), so other heads' or fused
 * buffers' columns are never touched, even by the thread that owns a neighbouring head. The
 * kernels allocate nothing: per-thread tiles live on the stack (about 80 KiB forward, 224 KiB
 * backward, so OpenMP threads need at least that much stack — the default is megabytes). */
#include "kernels-impl.h"
#include "vmath.h"

#include <math.h>
#include <stddef.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define LOG2E 1.44269504088896340736
#define LN2 0.69314718055994530942

/* Largest head size handled by the tiled path. Tiles hold (Br × Dp) floats with Dp = D rounded
 * up to the vector length; Br = Bc = 64 for D <= 128 and 32 above, so a tile is <= 8192 floats
 * (32 KiB) and the backward's per-thread stack use stays below 256 KiB. */
#define ATTN_SIMD_DMAX 256
#define TILE_FLOATS 8192
#define BLK_MAX 64
#define ST_FLOATS (BLK_MAX * BLK_MAX)

/* ---- exp2 ------------------------------------------------------------------------------------- */

/* 2^x for x <= ~0 (scores minus their running maximum). x = n + f with n = round(x), |f| <= 1/2;
 * 2^f by a degree-5 polynomial 1 + f·q(f) fitted here for relative error (iteratively
 * reweighted least squares toward minimax: 9.1e-8 with exact coefficients, 1.9e-7 evaluated in
 * float32); the constant term is exactly 1 so that 2^0 == 1 and an unchanged running maximum
 * rescales nothing. 2^n goes into the exponent. x is clamped first so that the mask value -inf
 * (and anything below the clamp) gives exactly 0:
 *   AVX-512: clamp at -151, 2^n applied by vscalef (p·2^-151 < 2^-150 rounds to +0; results in
 *            (2^-151, 2^-126) come out as subnormals);
 *   AVX2:    clamp at -127, 2^n built as (n + 127) << 23, which is the bit pattern of +0 for
 *            n = -127 (results below 2^-126.5 flush to 0). */
static inline av_f exp2_neg(av_f x) {
#if ATTN_ISA == 512
    av_f xc = av_max(x, av_set1(-151.0f));
#else
    av_f xc = av_max(x, av_set1(-127.0f));
#endif
    av_f n = av_round(xc);
    av_f f = av_sub(xc, n);
    av_f p = av_set1(1.3264724984765053e-3f);
    p = av_fmadd(p, f, av_set1(9.671512991189957e-3f));
    p = av_fmadd(p, f, av_set1(5.550733581185341e-2f));
    p = av_fmadd(p, f, av_set1(2.4022242426872253e-1f));
    p = av_fmadd(p, f, av_set1(6.931470036506653e-1f));
    p = av_fmadd(p, f, av_set1(1.0f));
#if ATTN_ISA == 512
    return _mm512_scalef_ps(p, n);
#else
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return av_mul(p, _mm256_castsi256_ps(e));
#endif
}

/* x with its first n lanes (0 <= n <= AV_LEN) replaced by -inf: the causal mask of one key row,
 * whose first n query lanes may not see the key. */
static inline av_f mask_first(av_f x, int n) {
#if ATTN_ISA == 512
    return _mm512_mask_mov_ps(x, av_tail(n), av_set1(-__builtin_inff()));
#else
    return _mm256_blendv_ps(x, av_set1(-__builtin_inff()), _mm256_castsi256_ps(av_tail(n)));
#endif
}

/* x with the lanes from n on (0 <= n <= AV_LEN) replaced by -inf: the sliding-window mask of one
 * key row, which query lanes n.. have left behind. */
static inline av_f mask_from(av_f x, int n) {
#if ATTN_ISA == 512
    return _mm512_mask_mov_ps(x, (av_mask)~av_tail(n), av_set1(-__builtin_inff()));
#else
    return _mm256_blendv_ps(av_set1(-__builtin_inff()), x, _mm256_castsi256_ps(av_tail(n)));
#endif
}

/* 0 where x == -inf, else x: the offset subtracted from scores in lanes that have seen no visible
 * key yet (so -inf - offset stays -inf instead of becoming NaN). */
static inline av_f zero_if_neginf(av_f x) {
    return av_select(av_lt(x, av_set1(-3.0e38f)), av_zero(), x);
}

/* ---- micro-kernel ----------------------------------------------------------------------------- */

/* C[r, v·L .. v·L+L) (+)= Σ_{k<K} A[r·ars + k·aks] · B[k·ldb + v·L ...] for r < R, v < NV.
 * acc: C = C ∘ cscale (if cscale) + product; else C = product. tail (1..AV_LEN): lanes of the last
 * vector that exist in C (C's masked lanes are neither read nor written; B is always read whole,
 * so B operands are padded or exactly full). */
typedef struct {
    const float *a;
    ptrdiff_t ars, aks;
    const float *b;
    ptrdiff_t ldb;
    float *c;
    ptrdiff_t ldc;
    const float *cscale; /* (NV·L) per-lane factor for the old C, or NULL */
    int k, acc, tail;
} mk_args;

/* MK_NVMAX: widest block, in vectors; wider C rows are split into chunks of at most this. */
#if ATTN_ISA == 512
#define MK_RMAX 12
#define MK_NVMAX 4
#else
#define MK_RMAX 8
#define MK_NVMAX 2
#endif

/* Full unrolling of the register-block loops (constant trip counts once mk_body is inlined) is
 * what keeps the accumulators in registers; each compiler needs its own spelling. */
#if defined(__clang__)
#define MK_UNROLL _Pragma("clang loop unroll(full) vectorize(disable)")
#else
#define MK_UNROLL _Pragma("GCC unroll 16")
#endif

static inline __attribute__((always_inline)) void mk_body(const int R, const int NV,
                                                           const mk_args *x) {
    /* Everything the loops need, in locals: stores through C may alias *x as far as the
     * compiler knows, and the epilogue must stay fully unrolled (accumulators in registers). */
    const float *a = x->a, *b = x->b;
    const ptrdiff_t ars = x->ars, aks = x->aks, ldb = x->ldb, ldc = x->ldc;
    const int K = x->k, tail = x->tail;
    float *const C = x->c;
    const float *const cs = x->cscale;
    av_f c[MK_RMAX][MK_NVMAX];
MK_UNROLL
    for (int r = 0; r < R; r++)
MK_UNROLL
        for (int v = 0; v < NV; v++) c[r][v] = av_zero();
    for (int kk = 0; kk < K; kk++) {
        av_f bv[MK_NVMAX];
MK_UNROLL
        for (int v = 0; v < NV; v++) bv[v] = av_load(b + v * AV_LEN);
MK_UNROLL
        for (int r = 0; r < R; r++) {
            av_f ar = av_set1(a[r * ars]);
MK_UNROLL
            for (int v = 0; v < NV; v++) c[r][v] = av_fmadd(ar, bv[v], c[r][v]);
        }
        a += aks;
        b += ldb;
    }
    if (x->acc) {
        av_f sc[MK_NVMAX];
MK_UNROLL
        for (int v = 0; v < NV; v++) sc[v] = cs ? av_load(cs + v * AV_LEN) : av_set1(1.0f);
MK_UNROLL
        for (int r = 0; r < R; r++)
MK_UNROLL
            for (int v = 0; v < NV - 1; v++) {
                float *cp = C + r * ldc + v * AV_LEN;
                av_store(cp, av_fmadd(av_load(cp), sc[v], c[r][v]));
            }
    } else {
MK_UNROLL
        for (int r = 0; r < R; r++)
MK_UNROLL
            for (int v = 0; v < NV - 1; v++) av_store(C + r * ldc + v * AV_LEN, c[r][v]);
    }
    /* The last vector of each row: possibly partial (masked lanes neither read nor written). */
    const int lv = NV - 1;
    const av_f scl = x->acc && cs ? av_load(cs + lv * AV_LEN) : av_set1(1.0f);
    if (tail == AV_LEN) {
MK_UNROLL
        for (int r = 0; r < R; r++) {
            float *cp = C + r * ldc + lv * AV_LEN;
            av_store(cp, x->acc ? av_fmadd(av_load(cp), scl, c[r][lv]) : c[r][lv]);
        }
    } else {
        const av_mask tm = av_tail(tail);
        for (int r = 0; r < R; r++) {
            float *cp = C + r * ldc + lv * AV_LEN;
            av_store_mask(cp, tm,
                          x->acc ? av_fmadd(av_load_mask(cp, tm), scl, c[r][lv]) : c[r][lv]);
        }
    }
}

typedef void (*mk_fn)(const mk_args *);

#define MK_DEF(R, NV)                                                                            \
    static void mk_##R##x##NV(const mk_args *x) { mk_body(R, NV, x); }
#define MK_DEF3(NV) MK_DEF(1, NV) MK_DEF(2, NV) MK_DEF(3, NV)
#define MK_DEF4(NV) MK_DEF3(NV) MK_DEF(4, NV)
#define MK_DEF6(NV) MK_DEF4(NV) MK_DEF(5, NV) MK_DEF(6, NV)
#define MK_DEF8(NV) MK_DEF6(NV) MK_DEF(7, NV) MK_DEF(8, NV)
#define MK_DEF12(NV) MK_DEF8(NV) MK_DEF(9, NV) MK_DEF(10, NV) MK_DEF(11, NV) MK_DEF(12, NV)
#define MK_TAB3(NV) NULL, mk_1x##NV, mk_2x##NV, mk_3x##NV
#define MK_TAB4(NV) MK_TAB3(NV), mk_4x##NV
#define MK_TAB6(NV) MK_TAB4(NV), mk_5x##NV, mk_6x##NV
#define MK_TAB8(NV) MK_TAB6(NV), mk_7x##NV, mk_8x##NV
#define MK_TAB12(NV) MK_TAB8(NV), mk_9x##NV, mk_10x##NV, mk_11x##NV, mk_12x##NV

/* Register blocks: R·NV accumulators + NV B vectors + 1 broadcast within the register file
 * (32 zmm / 16 ymm). Blocks of 4 zmm × 6 rows / 2 ymm × 6 rows measured fastest: wider blocks
 * re-read the broadcast side less but stream more of B per FMA, and B comes from L2. */
#if ATTN_ISA == 512
MK_DEF12(1) MK_DEF12(2) MK_DEF8(3) MK_DEF6(4)
static const int mk_rmax[MK_NVMAX + 1] = {0, 12, 12, 8, 6};
static const mk_fn mk_tab[MK_NVMAX + 1][MK_RMAX + 1] = {
    {NULL}, {MK_TAB12(1)}, {MK_TAB12(2)}, {MK_TAB8(3)}, {MK_TAB6(4)},
};
#else
MK_DEF8(1) MK_DEF6(2)
static const int mk_rmax[MK_NVMAX + 1] = {0, 8, 6};
static const mk_fn mk_tab[MK_NVMAX + 1][MK_RMAX + 1] = {
    {NULL}, {MK_TAB8(1)}, {MK_TAB6(2)},
};
#endif

/* C (M rows, nv vectors) (+)= A (M, K; element (r, k) at a[r·ars + k·aks]) · B (K, nv vectors,
 * row stride ldb), cut into micro-kernel blocks. tail: valid lanes of C's last vector. */
static void gemm_blocks(int M, int nv, int K, const float *a, ptrdiff_t ars, ptrdiff_t aks,
                        const float *b, ptrdiff_t ldb, float *c, ptrdiff_t ldc,
                        const float *cscale, int acc, int tail) {
    if (M <= 0 || nv <= 0) return;
    int v0 = 0;
    while (v0 < nv) {
        /* Split nv into near-equal chunks of at most MK_NVMAX vectors: a taller, narrower
         * block re-reads B (the operand streamed from L2) fewer times per FMA. */
        int left = nv - v0, chunks = (left + MK_NVMAX - 1) / MK_NVMAX;
        int nvb = (left + chunks - 1) / chunks;
        int rmax = mk_rmax[nvb];
        mk_args x;
        x.ars = ars;
        x.aks = aks;
        x.b = b + v0 * AV_LEN;
        x.ldb = ldb;
        x.ldc = ldc;
        x.cscale = cscale ? cscale + v0 * AV_LEN : NULL;
        x.k = K;
        x.acc = acc;
        x.tail = v0 + nvb == nv ? tail : AV_LEN;
        /* Rows in near-equal chunks (64 = 6·9 + 5·2 rather than 6·10 + 4): a short last chunk
         * would run a much narrower, less efficient block. */
        const int nchunk = (M + rmax - 1) / rmax, base = M / nchunk, extra = M % nchunk;
        for (int ci = 0, r0 = 0; ci < nchunk; ci++) {
            const int r = base + (ci < extra);
            x.a = a + r0 * ars;
            x.c = c + r0 * ldc + v0 * AV_LEN;
            mk_tab[nvb][r](&x);
            r0 += r;
        }
        v0 += nvb;
    }
}

/* ---- shared pieces ---------------------------------------------------------------------------- */

typedef struct {
    int br, bc; /* query and key block sizes (multiples of AV_LEN, <= BLK_MAX) */
    int nvq;    /* br / AV_LEN */
    int dp;     /* D rounded up to AV_LEN */
    int nvd;    /* dp / AV_LEN */
    int dtail;  /* lanes of D in the last vector */
} tiling;

/* The parameters' defaults resolved: K/V heads and batch strides. */
typedef struct {
    int hkv, grp;                 /* K/V heads; query heads per K/V head */
    ptrdiff_t sbq, sbk, sbv, sbo; /* batch strides in floats */
} geom;

static geom make_geom(const attn_attention_params *p) {
    geom G;
    G.hkv = p->H_kv ? p->H_kv : p->H;
    G.grp = p->H / G.hkv;
    G.sbq = p->sbq ? p->sbq : (ptrdiff_t)p->Tq * p->ldq;
    G.sbk = p->sbk ? p->sbk : (ptrdiff_t)p->Tk * p->ldk;
    G.sbv = p->sbv ? p->sbv : (ptrdiff_t)p->Tk * p->ldv;
    G.sbo = p->sbo ? p->sbo : (ptrdiff_t)p->Tq * p->ldo;
    return G;
}

/* Entry (b, h, i, 0) of the score bias, or NULL without one. */
static const float *bias_at(const attn_attention_params *p, int b, int h, int i) {
    if (!p->bias) return NULL;
    return p->bias + (ptrdiff_t)b * p->bias_sb + (ptrdiff_t)h * p->bias_sh +
           (ptrdiff_t)i * p->bias_sq;
}

static tiling make_tiling(int D) {
    tiling t;
    t.br = t.bc = D <= 128 ? 64 : 32;
    t.nvq = t.br / AV_LEN;
    t.dp = (D + AV_LEN - 1) / AV_LEN * AV_LEN;
    t.nvd = t.dp / AV_LEN;
    t.dtail = D - (t.nvd - 1) * AV_LEN;
    return t;
}

/* One past the last key any query of [i0, i0+ib) may see (<= 0: none). */
static int key_end(const attn_attention_params *p, int b, int i0, int ib) {
    int end = p->kv_len ? p->kv_len[b] : p->Tk;
    if (p->causal) {
        long lim = (long)i0 + ib + p->causal_offset; /* last query's limit + 1 */
        if (lim < end) end = lim < 0 ? 0 : (int)lim;
    }
    return end;
}

/* The first key any query of a block starting at query i0 may see: the first query's window
 * start (0 without a window). With key_end this bounds the key range a query block visits, so a
 * sliding window costs O(window + block) keys per block. Nothing visible when >= key_end. */
static int key_begin(const attn_attention_params *p, int i0) {
    if (p->window <= 0) return 0;
    const long lo = (long)i0 + p->causal_offset - p->window + 1;
    return lo <= 0 ? 0 : lo >= p->Tk ? p->Tk : (int)lo;
}

/* dst[c·ldd + r] = src[r·lds + c] · mul (add: dst[c·ldd + r] += src[r·lds + c] · mul) for
 * r < nr, c < nc: 8×8 blocks transposed in AVX registers (unpack / shuffle / 128-bit permute),
 * scalar loops for the edges. lds may be 0 or negative (a bias shared or reversed over rows). */
static inline __attribute__((always_inline)) void transpose_body(const float *src, ptrdiff_t lds,
                                                                 int nr, int nc, float *dst,
                                                                 ptrdiff_t ldd, float mul,
                                                                 const bool add) {
    const __m256 m = _mm256_set1_ps(mul);
#define TR_STORE(p, x)                                                                           \
    _mm256_storeu_ps((p), add ? _mm256_fmadd_ps(m, (x), _mm256_loadu_ps(p)) : _mm256_mul_ps(m, (x)))
    int r0 = 0;
    for (; r0 + 8 <= nr; r0 += 8) {
        int c0 = 0;
        for (; c0 + 8 <= nc; c0 += 8) {
            const float *s0 = src + r0 * lds + c0;
            __m256 a0 = _mm256_loadu_ps(s0), a1 = _mm256_loadu_ps(s0 + lds);
            __m256 a2 = _mm256_loadu_ps(s0 + 2 * lds), a3 = _mm256_loadu_ps(s0 + 3 * lds);
            __m256 a4 = _mm256_loadu_ps(s0 + 4 * lds), a5 = _mm256_loadu_ps(s0 + 5 * lds);
            __m256 a6 = _mm256_loadu_ps(s0 + 6 * lds), a7 = _mm256_loadu_ps(s0 + 7 * lds);
            __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
            __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
            __m256 t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5);
            __m256 t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *d0 = dst + c0 * ldd + r0;
            TR_STORE(d0, _mm256_permute2f128_ps(u0, u4, 0x20));
            TR_STORE(d0 + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
            TR_STORE(d0 + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
            TR_STORE(d0 + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
            TR_STORE(d0 + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
            TR_STORE(d0 + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
            TR_STORE(d0 + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
            TR_STORE(d0 + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (; c0 < nc; c0++)
            for (int r = r0; r < r0 + 8; r++) {
                float *d = dst + c0 * ldd + r;
                *d = add ? *d + src[r * lds + c0] * mul : src[r * lds + c0] * mul;
            }
    }
    for (; r0 < nr; r0++)
        for (int c = 0; c < nc; c++) {
            float *d = dst + c * ldd + r0;
            *d = add ? *d + src[r0 * lds + c] * mul : src[r0 * lds + c] * mul;
        }
#undef TR_STORE
}

static void transpose_scaled(const float *src, ptrdiff_t lds, int nr, int nc, float *dst,
                             ptrdiff_t ldd, float mul) {
    transpose_body(src, lds, nr, nc, dst, ldd, mul, false);
}

static void transpose_add_scaled(const float *src, ptrdiff_t lds, int nr, int nc, float *dst,
                                 ptrdiff_t ldd, float mul) {
    transpose_body(src, lds, nr, nc, dst, ldd, mul, true);
}

/* Qt (D, br) = transpose of the ib query rows starting at q (row stride ld), times mul; lanes
 * ib..br-1 are zero so the padded queries compute harmless finite values. */
static void pack_transposed(const float *q, ptrdiff_t ld, int ib, int D, int br, float mul,
                            float *qt) {
    if (ib < br)
        for (int d = 0; d < D; d++) memset(qt + (size_t)d * br + ib, 0, sizeof(float) * (br - ib));
    transpose_scaled(q, ld, ib, D, qt, br, mul);
}

/* Σ a[d]·b[d] over d < n, in vectors (masked tail). */
static float row_dot(const float *a, const float *b, int n) {
    av_f s = av_zero();
    int d = 0;
    for (; d + AV_LEN <= n; d += AV_LEN) s = av_fmadd(av_load(a + d), av_load(b + d), s);
    if (d < n) {
        const av_mask m = av_tail(n - d);
        s = av_fmadd(av_load_mask(a + d, m), av_load_mask(b + d, m), s);
    }
    return av_reduce_add(s);
}

/* Rows (n, dp) = the n rows at src (row stride ld, D columns), zero-padded to dp columns. */
static void pack_rows(const float *src, ptrdiff_t ld, int n, int D, int dp, float *dst) {
    for (int i = 0; i < n; i++) {
        memcpy(dst + (size_t)i * dp, src + i * ld, sizeof(float) * D);
        if (dp > D) memset(dst + (size_t)i * dp + D, 0, sizeof(float) * (dp - D));
    }
}

/* Causal mask of the score tile St (jb, br) for keys j0.. and queries i0..: query lane i may see
 * key j iff i0 + i + off >= j. Only called when the tile straddles the diagonal. */
static void mask_causal(float *st, const tiling *t, int jb, int j0, int i0, int off) {
    for (int jj = 0; jj < jb; jj++) {
        long hidden = (long)j0 + jj - off - i0; /* lanes [0, hidden) may not see key j */
        if (hidden <= 0) continue;
        float *row = st + (size_t)jj * t->br;
        for (int v = 0; v < t->nvq; v++) {
            long n = hidden - (long)v * AV_LEN;
            if (n <= 0) break;
            av_store(row + v * AV_LEN,
                     mask_first(av_load(row + v * AV_LEN), n >= AV_LEN ? AV_LEN : (int)n));
        }
    }
}

/* Geometry of one (query block i0, key block j0) tile. On a tile that straddles the causal
 * diagonal ("diag"), key row jj is hidden from query lanes [0, hid0 + jj); the work there is
 * done in groups of SUB keys (or queries), each restricted to the lane vectors / key range that
 * can be visible, which skips about half of a diagonal tile. Skipped entries are exactly those
 * whose probability is 0, so the results do not change. With a sliding window, key row jj is
 * also hidden from query lanes [hid0 + jj + window, br): a tile where that reaches a real query
 * lane ("win") gets those scores set to -inf (computed, then masked: at most two such tiles per
 * query block when window >= the block size). */
#define SUB 16
typedef struct {
    int j0, i0, jb, ib;
    bool diag, win;
    long hid0; /* hidden query lanes of key row 0 (<= 0: none) */
} tile;

static tile make_tile(const attn_attention_params *p, int i0, int ib, int j0, int jb) {
    tile g = {j0, i0, jb, ib, false, false, (long)j0 - p->causal_offset - i0};
    g.diag = p->causal && (long)j0 + jb - 1 > (long)i0 + p->causal_offset;
    g.win = p->window > 0 && (long)ib - 1 >= g.hid0 + p->window;
    return g;
}

/* First lane vector that some key of the group starting at key row s0 can see. */
static int lo_vec(const tiling *t, const tile *g, int s0) {
    if (!g->diag) return 0;
    long h = g->hid0 + s0;
    if (h <= 0) return 0;
    return (int)ATTN_MIN(h / AV_LEN, (long)t->nvq - 1);
}

/* C (jb, br) = rows of A (jb, D; row stride lda) · Bt (D, br): the score-shaped products
 * (K_j·Qt, V_j·dOt). On a diagonal tile, lanes no key of a group can see are left unwritten. */
static void key_rows_gemm(const tiling *t, const tile *g, int D, const float *a, ptrdiff_t lda,
                          const float *bt, float *c) {
    if (!g->diag) {
        gemm_blocks(g->jb, t->nvq, D, a, lda, 1, bt, t->br, c, t->br, NULL, 0, AV_LEN);
        return;
    }
    for (int s0 = 0; s0 < g->jb; s0 += SUB) {
        const int lo = lo_vec(t, g, s0);
        gemm_blocks(ATTN_MIN(SUB, g->jb - s0), t->nvq - lo, D, a + s0 * lda, lda, 1,
                    bt + lo * AV_LEN, t->br, c + (size_t)s0 * t->br + lo * AV_LEN, t->br, NULL,
                    0, AV_LEN);
    }
}

/* Sliding-window mask of the score tile St (jb, br): key row jj is hidden from query lanes
 * [hid0 + jj + window, br) (the queries whose window has passed it). */
static void mask_window(float *st, const tiling *t, const tile *g, int window) {
    for (int jj = 0; jj < g->jb; jj++) {
        const long first = g->hid0 + jj + window; /* first lane that may not see key jj */
        if (first >= t->br) break;                 /* grows with jj */
        float *row = st + (size_t)jj * t->br;
        for (int v = t->nvq - 1; v >= 0; v--) {
            const long n = first - (long)v * AV_LEN; /* lanes of vector v that still see it */
            if (n >= AV_LEN) break;
            av_store(row + v * AV_LEN, n <= 0 ? av_set1(-__builtin_inff())
                                              : mask_from(av_load(row + v * AV_LEN), (int)n));
        }
    }
}

/* Scores St (jb, br) = K rows j0.. · Qt (+ bias · log2 e), with -inf where masked (including
 * every lane key_rows_gemm skipped). k points at key j0 of this (b, K/V head); bias, if not
 * NULL, at entry (i0, j0) of this (b, h) (rows i at bias_sq apart). The bias goes in after the
 * causal mask, which thereby also covers the skipped lanes' stale values (-inf + bias = -inf).
 * This is the one place scores are computed: the forward, its probabilities pass and the
 * backward all get bit-identical scores from it. */
static void score_tile(const attn_attention_params *p, const tiling *t, const tile *g,
                       const float *k, const float *bias, const float *qt, float *st) {
    key_rows_gemm(t, g, p->D, k, p->ldk, qt, st);
    if (g->diag) mask_causal(st, t, g->jb, g->j0, g->i0, p->causal_offset);
    if (g->win) mask_window(st, t, g, p->window);
    if (bias) transpose_add_scaled(bias, p->bias_sq, g->ib, g->jb, st, t->br, (float)LOG2E);
}

/* ---- forward ---------------------------------------------------------------------------------- */

typedef struct {
    _Alignas(64) float qt[TILE_FLOATS]; /* (D, br) scaled queries, transposed */
    _Alignas(64) float ot[TILE_FLOATS]; /* (D, br) unnormalized output, transposed */
    _Alignas(64) float st[ST_FLOATS];   /* (bc, br) scores, then probabilities */
    _Alignas(64) float m[BLK_MAX];      /* (br) running max, log2 domain */
    _Alignas(64) float l[BLK_MAX];      /* (br) running sum of 2^(s − m) */
    _Alignas(64) float alpha[BLK_MAX];  /* (br) rescale factor of this step */
} fwd_tiles;

/* One (b, h, query block). */
static void fwd_block(const attn_attention_params *p, const tiling *t, const geom *G, int b,
                      int h, int i0, const float *q, const float *k, const float *v, float *o,
                      float *lse, float *probs, fwd_tiles *w) {
    const int D = p->D, br = t->br;
    const int ib = ATTN_MIN(br, p->Tq - i0);
    const ptrdiff_t hd = (ptrdiff_t)h * D, gd = (ptrdiff_t)(h / G->grp) * D;
    const float *qb = q + b * G->sbq + (ptrdiff_t)i0 * p->ldq + hd; /* (ib, D) stride ldq */
    const float *kb = k + b * G->sbk + gd;                          /* (Tk, D) stride ldk */
    const float *vb = v + b * G->sbv + gd;                          /* (Tk, D) stride ldv */
    float *ob = o + b * G->sbo + (ptrdiff_t)i0 * p->ldo + hd;       /* (ib, D) stride ldo */
    const float *bb = bias_at(p, b, h, i0); /* (ib, Tk) row stride bias_sq, or NULL */
    const int jbeg = key_begin(p, i0), jend = key_end(p, b, i0, ib);

    pack_transposed(qb, p->ldq, ib, D, br, (float)(p->scale * LOG2E), w->qt);
    memset(w->ot, 0, sizeof(float) * (size_t)D * br);
    for (int i = 0; i < br; i++) {
        w->m[i] = -__builtin_inff();
        w->l[i] = 0.0f;
    }

    for (int j0 = jbeg; j0 < jend; j0 += t->bc) {
        const int jb = ATTN_MIN(t->bc, jend - j0);
        const tile g = make_tile(p, i0, ib, j0, jb);
        score_tile(p, t, &g, kb + (size_t)j0 * p->ldk, bb ? bb + j0 : NULL, w->qt, w->st);
        /* Online softmax, one vector of query lanes at a time, over every key row of the tile
         * (on a diagonal tile the hidden entries are -inf: probability 0). */
        for (int vv = 0; vv < t->nvq; vv++) {
            float *col = w->st + vv * AV_LEN;
            av_f mold = av_load(w->m + vv * AV_LEN), mx = mold;
            for (int jj = 0; jj < jb; jj++) mx = av_max(mx, av_load(col + (size_t)jj * br));
            av_f off = zero_if_neginf(mx);
            av_f sum = av_zero();
            for (int jj = 0; jj < jb; jj++) {
                av_f e = exp2_neg(av_sub(av_load(col + (size_t)jj * br), off));
                av_store(col + (size_t)jj * br, e);
                sum = av_add(sum, e);
            }
            av_f al = exp2_neg(av_sub(mold, off));
            av_store(w->alpha + vv * AV_LEN, al);
            av_store(w->l + vv * AV_LEN, av_fmadd(av_load(w->l + vv * AV_LEN), al, sum));
            av_store(w->m + vv * AV_LEN, mx);
        }
        /* Ot = Ot · alpha + V_jᵀ · Pt : rows d, k over keys; V[j][d] at vb[j·ldv + d]. One sum
         * over all the tile's keys, on a diagonal tile too (the hidden ones add exact zeros):
         * a query lane's output then depends only on the keys it sees, never on the other
         * queries of its block (fwd_few, decoding a query alone or a few, gives the same bits
         * as this block of a prompt; an earlier version summed a diagonal tile in groups of 16
         * keys, and a prompt's 17th token then differed from the same token decoded alone). */
        gemm_blocks(D, t->nvq, jb, vb + (size_t)j0 * p->ldv, 1, p->ldv, w->st, br, w->ot, br,
                    w->alpha, 1, AV_LEN);
    }

    /* O = Otᵀ / l; rows that saw no key (l == 0) get 0. */
    for (int i = 0; i < br; i++) w->alpha[i] = w->l[i] > 0.0f ? 1.0f / w->l[i] : 0.0f;
    for (int d = 0; d < D; d++)
        for (int vv = 0; vv < t->nvq; vv++) {
            float *x = w->ot + (size_t)d * br + vv * AV_LEN;
            av_store(x, av_mul(av_load(x), av_load(w->alpha + vv * AV_LEN)));
        }
    transpose_scaled(w->ot, br, D, ib, ob, p->ldo, 1.0f);
    if (lse) {
        float *lrow = lse + ((size_t)b * p->H + h) * p->Tq + i0;
        for (int i = 0; i < ib; i++)
            lrow[i] = w->l[i] > 0.0f ? (float)((double)w->m[i] * LN2 + log((double)w->l[i]))
                                     : -__builtin_inff();
    }
    if (!probs) return;

    /* Second pass: probabilities 2^(s − lse2) from recomputed (identical) score tiles. Reuse l
     * to hold lse2 (+inf for empty rows, so their probabilities are 0). */
    for (int i = 0; i < br; i++)
        w->l[i] = w->l[i] > 0.0f ? (float)((double)w->m[i] + log2((double)w->l[i]))
                                 : __builtin_inff();
    float *pb = probs + (((size_t)b * p->H + h) * p->Tq + i0) * p->Tk; /* (ib, Tk) */
    for (int i = 0; i < ib; i++) memset(pb + (size_t)i * p->Tk, 0, sizeof(float) * p->Tk);
    for (int j0 = jbeg; j0 < jend; j0 += t->bc) {
        const int jb = ATTN_MIN(t->bc, jend - j0);
        const tile g = make_tile(p, i0, ib, j0, jb);
        score_tile(p, t, &g, kb + (size_t)j0 * p->ldk, bb ? bb + j0 : NULL, w->qt, w->st);
        for (int jj = 0; jj < jb; jj++) {
            float *row = w->st + (size_t)jj * br;
            for (int vv = 0; vv < t->nvq; vv++)
                av_store(row + vv * AV_LEN, exp2_neg(av_sub(av_load(row + vv * AV_LEN),
                                                             av_load(w->l + vv * AV_LEN))));
        }
        transpose_scaled(w->st, br, jb, ib, pb + j0, p->Tk, 1.0f);
    }
}

/* ---- few queries: decoding ------------------------------------------------------------------ */

/* A decoding step has one query (or a few) per sequence and head. fwd_block would run a whole
 * block of br query lanes for it, all but one of them padding (64× the work at br = 64). Here one
 * work item is (batch b, K/V head g) with the Tq queries of every query head of the group as
 * R = (H / H_kv)·Tq rows, so each key tile is transposed once for all of them and each value row
 * read once per row. The arithmetic is fwd_block's, operation for operation, so every result is
 * bit-identical to the tiled path's (a row's output never depends on how many rows its call
 * has: the translator's beams and batches rely on it):
 *   - the same key tiles (bc keys from the block's first key; query block i0 = 0 of ib = Tq);
 *   - scores as the same FMA chains over d (keys in the vector lanes instead of queries:
 *     fma(k, q, s) == fma(q, k, s)), from queries scaled by the same float;
 *   - the same online softmax per tile (max, 2^(s − off), the sum key by key in order,
 *     l = fma(l, alpha, sum));
 *   - o = fma(o, alpha, Σ_j p_j·v_j) with the sum an FMA chain over the tile's keys in order;
 * and keys a row cannot see, whose probabilities are exactly 0, are skipped (adding zeros changes
 * no sum). The probabilities, when asked for, come from the same recomputed scores. Without a
 * score bias (that takes the tiled path). */
#define FEW_Q 4   /* queries per sequence and head up to which decoding takes this path */
#define FEW_R 32  /* rows per work item at most: (H / H_kv)·Tq */

typedef struct {
    _Alignas(64) float kt[TILE_FLOATS];             /* (D, bc) the tile's keys, transposed */
    _Alignas(64) float o[FEW_R * ATTN_SIMD_DMAX];   /* (R, dp) unnormalized outputs */
    _Alignas(64) float pv[ATTN_SIMD_DMAX];          /* (dp) one group's Σ p·v */
    _Alignas(64) float s[FEW_R * BLK_MAX];          /* (R, BLK_MAX) the rows' scores, then
                                                       probabilities */
    float q[FEW_R * ATTN_SIMD_DMAX];                /* (R, D) queries · scale·log2 e */
    int lo[FEW_R], hi[FEW_R];                       /* (R) each row's visible keys [lo, hi) */
    float m[FEW_R], l[FEW_R];                       /* (R) running max (log2 domain) and sum */
} few_tiles;

static bool few_path(const attn_attention_params *p, const geom *G) {
    return p->Tq <= FEW_Q && G->grp * p->Tq <= FEW_R && !p->bias && p->D <= ATTN_SIMD_DMAX;
}

/* Scores Σ_d q[d]·Kt[d][keys] of G rows at once, one FMA chain per score over d in order (as
 * the tiled scores) (queries q + rs[g]·D, scores into s + rs[g]·BLK_MAX) over NV
 * key vectors from vector v0: the rows' FMA chains side by side, so a decoding step with one
 * query per row is not bound by one chain's latency; each score is still its own chain over d
 * in order, with the same operands: the same bits. G, NV constants (few_scores_rows). */
static inline __attribute__((always_inline)) void few_chains(int G, int NV, bool H,
                                                             const float *q, int D,
                                                             const int *rs, const void *kt,
                                                             ptrdiff_t ldt, int v0, float *s) {
    av_f acc[4][4];
    for (int g = 0; g < G; g++)
        for (int v = 0; v < NV; v++) acc[g][v] = av_zero();
    /* H: the keys as binary16 (attn_attention_params.kt16), converted exactly on load */
    const float *kv = H ? NULL : (const float *)kt + (ptrdiff_t)v0 * AV_LEN;
    const uint16_t *kvh = H ? (const uint16_t *)kt + (ptrdiff_t)v0 * AV_LEN : NULL;
    for (int d = 0; d < D; d++) {
        av_f kd[4];
        for (int v = 0; v < NV; v++)
            kd[v] = H ? av_load_h(kvh + (ptrdiff_t)d * ldt + v * AV_LEN)
                      : av_load(kv + (ptrdiff_t)d * ldt + v * AV_LEN);
        for (int g = 0; g < G; g++) {
            const av_f qd = av_set1(q[(size_t)rs[g] * D + d]);
            for (int v = 0; v < NV; v++) acc[g][v] = av_fmadd(qd, kd[v], acc[g][v]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int v = 0; v < NV; v++)
            av_store(s + (size_t)rs[g] * BLK_MAX + (size_t)(v0 + v) * AV_LEN, acc[g][v]);
}

#if AV_LEN == 16
#define FEW_G 4 /* rows whose chains run together (G·NV accumulators: 16 of 32 registers) */
#else
#define FEW_G 2 /* (8 of AVX2's 16) */
#endif
#define FEW_CHAINS(G, NV)                                                                        \
    static void few_chains_##G##_##NV(const float *q, int D, const int *rs, const void *kt,      \
                                      ptrdiff_t ldt, int v0, float *s) {                         \
        few_chains(G, NV, false, q, D, rs, kt, ldt, v0, s);                                      \
    }                                                                                            \
    static void few_chains_h_##G##_##NV(const float *q, int D, const int *rs, const void *kt,    \
                                        ptrdiff_t ldt, int v0, float *s) {                       \
        few_chains(G, NV, true, q, D, rs, kt, ldt, v0, s);                                       \
    }
typedef void (*few_chains_fn)(const float *, int, const int *, const void *, ptrdiff_t, int,
                              float *);
FEW_CHAINS(1, 1) FEW_CHAINS(1, 2) FEW_CHAINS(1, 3) FEW_CHAINS(1, 4)
FEW_CHAINS(2, 1) FEW_CHAINS(2, 2) FEW_CHAINS(2, 3) FEW_CHAINS(2, 4)
#if FEW_G == 4
FEW_CHAINS(3, 1) FEW_CHAINS(3, 2) FEW_CHAINS(3, 3) FEW_CHAINS(3, 4)
FEW_CHAINS(4, 1) FEW_CHAINS(4, 2) FEW_CHAINS(4, 3) FEW_CHAINS(4, 4)
#endif
static const few_chains_fn few_chains_fns[2][FEW_G][4] = {
    {{few_chains_1_1, few_chains_1_2, few_chains_1_3, few_chains_1_4},
     {few_chains_2_1, few_chains_2_2, few_chains_2_3, few_chains_2_4},
#if FEW_G == 4
     {few_chains_3_1, few_chains_3_2, few_chains_3_3, few_chains_3_4},
     {few_chains_4_1, few_chains_4_2, few_chains_4_3, few_chains_4_4},
#endif
    },
    {{few_chains_h_1_1, few_chains_h_1_2, few_chains_h_1_3, few_chains_h_1_4},
     {few_chains_h_2_1, few_chains_h_2_2, few_chains_h_2_3, few_chains_h_2_4},
#if FEW_G == 4
     {few_chains_h_3_1, few_chains_h_3_2, few_chains_h_3_3, few_chains_h_3_4},
     {few_chains_h_4_1, few_chains_h_4_2, few_chains_h_4_3, few_chains_h_4_4},
#endif
    }};

/* Scores of the nr rows rs[] for key vectors [v0, v1) of the tile, into s + r·BLK_MAX. */
static void few_scores_rows(const float *q, int D, const int *rs, int nr, const void *kt, bool h,
                            ptrdiff_t ldt, int v0, int v1, float *s) {
    for (int g0 = 0; g0 < nr; g0 += FEW_G)
        for (int vb = v0; vb < v1; vb += 4)
            few_chains_fns[h][ATTN_MIN(FEW_G, nr - g0) - 1][ATTN_MIN(4, v1 - vb) - 1](
                q, D, rs + g0, kt, ldt, vb, s);
}

/* A row's scores sr (from few_scores_rows) for the tile's keys [a, e): -inf around them (whole
 * vectors), their maximum with m returned. */
static float few_row_mask(float *sr, int a, int e, float m) {
    for (int jj = a / AV_LEN * AV_LEN; jj < a; jj++) sr[jj] = -__builtin_inff();
    for (int jj = e; jj < (e + AV_LEN - 1) / AV_LEN * AV_LEN; jj++) sr[jj] = -__builtin_inff();
    for (int jj = a; jj < e; jj++) m = sr[jj] > m ? sr[jj] : m;
    return m;
}

#define FEW_PVR 4 /* rows whose P·V sums run together (few_pv_rows) */
#if AV_LEN == 16
#define FEW_PVR_NV 4 /* vectors of D at most there (FEW_PVR·FEW_PVR_NV sums: 16 of 32 registers) */
#else
#define FEW_PVR_NV 2 /* (8 of AVX2's 16) */
#endif

/* few_pv with NV (a constant) vectors of sums held in registers. */
static inline __attribute__((always_inline)) void few_pv_regs(int NV, bool H, const float *p,
                                                              const void *vb, ptrdiff_t ldv,
                                                              int a, int e, int full, av_mask tm,
                                                              float alpha, float *o) {
    av_f acc[8];
    for (int vv = 0; vv < NV; vv++) acc[vv] = av_zero();
    for (int jj = a; jj < e; jj++) {
        /* H: binary16 values (attn_attention_params.v16; only with full == NV) */
        const float *vr = H ? NULL : (const float *)vb + (ptrdiff_t)jj * ldv;
        const uint16_t *vh = H ? (const uint16_t *)vb + (ptrdiff_t)jj * ldv : NULL;
        const av_f pj = av_set1(p[jj]);
        for (int vv = 0; vv < NV; vv++) {
            const av_f x = H           ? av_load_h(vh + vv * AV_LEN)
                           : vv < full ? av_load(vr + vv * AV_LEN)
                                       : av_load_mask(vr + vv * AV_LEN, tm);
            acc[vv] = av_fmadd(pj, x, acc[vv]);
        }
    }
    const av_f al = av_set1(alpha);
    for (int vv = 0; vv < NV; vv++)
        av_store(o + vv * AV_LEN, av_fmadd(av_load(o + vv * AV_LEN), al, acc[vv]));
}
#define FEW_PV(NV)                                                                               \
    static void few_pv_##NV(const float *p, const void *vb, ptrdiff_t ldv, int a, int e,         \
                            int full, av_mask tm, float alpha, float *o) {                       \
        few_pv_regs(NV, false, p, vb, ldv, a, e, full, tm, alpha, o);                            \
    }                                                                                            \
    static void few_pv_h_##NV(const float *p, const void *vb, ptrdiff_t ldv, int a, int e,       \
                              int full, av_mask tm, float alpha, float *o) {                     \
        few_pv_regs(NV, true, p, vb, ldv, a, e, full, tm, alpha, o);                             \
    }
FEW_PV(1) FEW_PV(2) FEW_PV(3) FEW_PV(4) FEW_PV(5) FEW_PV(6) FEW_PV(7) FEW_PV(8)
typedef void (*few_pv_fn)(const float *, const void *, ptrdiff_t, int, int, int, av_mask, float,
                          float *);
static const few_pv_fn few_pv_fns[2][8] = {
    {few_pv_1, few_pv_2, few_pv_3, few_pv_4, few_pv_5, few_pv_6, few_pv_7, few_pv_8},
    {few_pv_h_1, few_pv_h_2, few_pv_h_3, few_pv_h_4, few_pv_h_5, few_pv_h_6, few_pv_h_7,
     few_pv_h_8}};

/* few_pv_regs for NR rows (constants NR, NV) that see the same keys [a, e) of a tile: each row's
 * sums the same FMA chains over the keys in order as few_pv_regs gives it alone (the same bits),
 * side by side, so each value row is loaded once for the NR rows and the NR·NV chains overlap
 * (one row's NV chains leave the FMA units waiting on their latency). Row r's probabilities
 * p[r], its alpha al[r], its output o[r]. A decoding step's query heads of one K/V head (GQA:
 * SmolLM2's 3) are such rows. */
static inline __attribute__((always_inline)) void few_pv_rows(int NR, int NV, bool H,
                                                              const float *const *p,
                                                              const void *vb, ptrdiff_t ldv,
                                                              int a, int e, int full, av_mask tm,
                                                              const float *al, float *const *o) {
    av_f acc[FEW_PVR][FEW_PVR_NV];
    for (int r = 0; r < NR; r++)
        for (int vv = 0; vv < NV; vv++) acc[r][vv] = av_zero();
    for (int jj = a; jj < e; jj++) {
        const float *vr = H ? NULL : (const float *)vb + (ptrdiff_t)jj * ldv;
        const uint16_t *vh = H ? (const uint16_t *)vb + (ptrdiff_t)jj * ldv : NULL;
        av_f x[FEW_PVR_NV];
        for (int vv = 0; vv < NV; vv++)
            x[vv] = H           ? av_load_h(vh + vv * AV_LEN)
                    : vv < full ? av_load(vr + vv * AV_LEN)
                                : av_load_mask(vr + vv * AV_LEN, tm);
        for (int r = 0; r < NR; r++) {
            const av_f pj = av_set1(p[r][jj]);
            for (int vv = 0; vv < NV; vv++) acc[r][vv] = av_fmadd(pj, x[vv], acc[r][vv]);
        }
    }
    for (int r = 0; r < NR; r++) {
        const av_f alv = av_set1(al[r]);
        for (int vv = 0; vv < NV; vv++)
            av_store(o[r] + vv * AV_LEN, av_fmadd(av_load(o[r] + vv * AV_LEN), alv, acc[r][vv]));
    }
}
#define FEW_PVR_FN(NR, NV)                                                                       \
    static void few_pvr_##NR##_##NV(const float *const *p, const void *vb, ptrdiff_t ldv, int a,  \
                                    int e, int full, av_mask tm, const float *al,                \
                                    float *const *o) {                                           \
        few_pv_rows(NR, NV, false, p, vb, ldv, a, e, full, tm, al, o);                           \
    }                                                                                            \
    static void few_pvr_h_##NR##_##NV(const float *const *p, const void *vb, ptrdiff_t ldv,       \
                                      int a, int e, int full, av_mask tm, const float *al,       \
                                      float *const *o) {                                         \
        few_pv_rows(NR, NV, true, p, vb, ldv, a, e, full, tm, al, o);                            \
    }
typedef void (*few_pvr_fn)(const float *const *, const void *, ptrdiff_t, int, int, int, av_mask,
                           const float *, float *const *);
#if AV_LEN == 16
FEW_PVR_FN(2, 1) FEW_PVR_FN(2, 2) FEW_PVR_FN(2, 3) FEW_PVR_FN(2, 4)
FEW_PVR_FN(3, 1) FEW_PVR_FN(3, 2) FEW_PVR_FN(3, 3) FEW_PVR_FN(3, 4)
FEW_PVR_FN(4, 1) FEW_PVR_FN(4, 2) FEW_PVR_FN(4, 3) FEW_PVR_FN(4, 4)
static const few_pvr_fn few_pvr_fns[2][FEW_PVR - 1][FEW_PVR_NV] = {
    {{few_pvr_2_1, few_pvr_2_2, few_pvr_2_3, few_pvr_2_4},
     {few_pvr_3_1, few_pvr_3_2, few_pvr_3_3, few_pvr_3_4},
     {few_pvr_4_1, few_pvr_4_2, few_pvr_4_3, few_pvr_4_4}},
    {{few_pvr_h_2_1, few_pvr_h_2_2, few_pvr_h_2_3, few_pvr_h_2_4},
     {few_pvr_h_3_1, few_pvr_h_3_2, few_pvr_h_3_3, few_pvr_h_3_4},
     {few_pvr_h_4_1, few_pvr_h_4_2, few_pvr_h_4_3, few_pvr_h_4_4}}};
#else
FEW_PVR_FN(2, 1) FEW_PVR_FN(2, 2) FEW_PVR_FN(3, 1) FEW_PVR_FN(3, 2)
FEW_PVR_FN(4, 1) FEW_PVR_FN(4, 2)
static const few_pvr_fn few_pvr_fns[2][FEW_PVR - 1][FEW_PVR_NV] = {
    {{few_pvr_2_1, few_pvr_2_2}, {few_pvr_3_1, few_pvr_3_2}, {few_pvr_4_1, few_pvr_4_2}},
    {{few_pvr_h_2_1, few_pvr_h_2_2}, {few_pvr_h_3_1, few_pvr_h_3_2}, {few_pvr_h_4_1, few_pvr_h_4_2}}};
#endif

/* o (dp) = fma(o, alpha, Σ_{j in [a, e)} p[j]·V[j]), the sum an FMA chain
 * over the keys in order (pv, dp floats, scratch). */
static void few_pv(const float *p, const float *vb, const uint16_t *vbh, ptrdiff_t ldv, int a,
                   int e, int nv, int full, av_mask tm, float alpha, float *pv, float *o) {
    if (vbh) { /* the binary16 copy (nv <= 8, full == nv: fwd_few checks) */
        few_pv_fns[1][nv - 1](p, vbh, ldv, a, e, full, tm, alpha, o);
        return;
    }
    if (nv <= 8) { /* the same sums, in registers instead of pv */
        few_pv_fns[0][nv - 1](p, vb, ldv, a, e, full, tm, alpha, o);
        return;
    }
    for (int vv = 0; vv < nv; vv++) av_store(pv + vv * AV_LEN, av_zero());
    for (int jj = a; jj < e; jj++) {
        const float *vr = vb + (ptrdiff_t)jj * ldv;
        const av_f pj = av_set1(p[jj]);
        for (int vv = 0; vv < nv; vv++) {
            const av_f x = vv < full ? av_load(vr + vv * AV_LEN) : av_load_mask(vr + vv * AV_LEN, tm);
            av_store(pv + vv * AV_LEN, av_fmadd(pj, x, av_load(pv + vv * AV_LEN)));
        }
    }
    const av_f al = av_set1(alpha);
    for (int vv = 0; vv < nv; vv++)
        av_store(o + vv * AV_LEN,
                 av_fmadd(av_load(o + vv * AV_LEN), al, av_load(pv + vv * AV_LEN)));
}

static void fwd_few(const attn_attention_params *p, const tiling *t, const geom *G, int b, int g,
                    const float *q, const float *k, const float *v, float *o, float *lse,
                    float *probs, few_tiles *w) {
    const int D = p->D, Tq = p->Tq, R = G->grp * Tq, bc = t->bc;
    const int nv = t->nvd, dp = t->dp, full = D / AV_LEN;
    const av_mask tm = av_tail(t->dtail);
    const float mul = (float)(p->scale * LOG2E);
    const float *kb = k + b * G->sbk + (ptrdiff_t)g * D; /* (Tk, D) stride ldk */
    const float *vb = v + b * G->sbv + (ptrdiff_t)g * D; /* (Tk, D) stride ldv */
    /* (D, Tk) stride ldkt: the caller's transposed keys, else each tile's transposed into w->kt */
    const ptrdiff_t ktoff = b * (p->sbkt ? p->sbkt : (ptrdiff_t)G->hkv * D * p->ldkt) +
                            (ptrdiff_t)g * D * p->ldkt;
    /* the binary16 copies (kt16, v16: the same values as k and v) when given: half the bytes */
    const uint16_t *ktbh = p->kt16 ? p->kt16 + ktoff : NULL;
    const float *ktb = !ktbh && p->kt ? p->kt + ktoff : NULL;
    const void *ktsrc = ktbh ? (const void *)ktbh : (const void *)ktb;
    const ptrdiff_t ldt = ktsrc ? p->ldkt : bc;
    const uint16_t *vbh = p->v16 && full == nv && nv <= 8
                              ? p->v16 + b * G->sbv + (ptrdiff_t)g * D
                              : NULL; /* (Tk, D) stride ldv */
    for (int r = 0; r < R; r++) { /* row r: query i of head g·grp + r / Tq */
        const int h = g * G->grp + r / Tq, i = r % Tq;
        const float *qr = q + b * G->sbq + (ptrdiff_t)i * p->ldq + (ptrdiff_t)h * D;
        for (int d = 0; d < D; d++) w->q[(size_t)r * D + d] = qr[d] * mul;
        memset(w->o + (size_t)r * dp, 0, sizeof(float) * (size_t)dp);
        w->lo[r] = key_begin(p, i);
        w->hi[r] = key_end(p, b, i, 1);
        w->m[r] = -__builtin_inff();
        w->l[r] = 0.0f;
    }
    /* fwd_block's tiles: query block 0 (Tq queries) */
    const int jbeg = key_begin(p, 0), jend = key_end(p, b, 0, Tq);
    for (int j0 = jbeg; j0 < jend; j0 += bc) {
        const int jb = ATTN_MIN(bc, jend - j0);
        /* the rows that see a key of this tile (the others do not change), and the key
         * vectors any of them needs */
        int vis[FEW_R], nvis = 0, ua = jb, ue = 0;
        float als[FEW_R]; /* (nvis) the visible rows' alpha */
        for (int r = 0; r < R; r++) {
            const int a = ATTN_MAX(w->lo[r], j0) - j0, e = ATTN_MIN(w->hi[r], j0 + jb) - j0;
            if (a >= e) continue;
            vis[nvis++] = r;
            ua = ATTN_MIN(ua, a), ue = ATTN_MAX(ue, e);
        }
        if (!nvis) continue;
        if (!ktsrc) transpose_scaled(kb + (ptrdiff_t)j0 * p->ldk, p->ldk, jb, D, w->kt, bc, 1.0f);
        few_scores_rows(w->q, D, vis, nvis,
                        ktbh  ? (const void *)(ktbh + j0)
                        : ktb ? (const void *)(ktb + j0)
                              : (const void *)w->kt,
                        ktbh != NULL, ldt, ua / AV_LEN, (ue + AV_LEN - 1) / AV_LEN, w->s);
        for (int ir = 0; ir < nvis; ir++) {
            const int r = vis[ir];
            const int a = ATTN_MAX(w->lo[r], j0) - j0, e = ATTN_MIN(w->hi[r], j0 + jb) - j0;
            float *sr = w->s + (size_t)r * BLK_MAX;
            const float mx = few_row_mask(sr, a, e, w->m[r]);
            const float off = mx < -3.0e38f ? 0.0f : mx; /* zero_if_neginf */
            const av_f offv = av_set1(off);
            for (int jj = a / AV_LEN * AV_LEN; jj < e; jj += AV_LEN)
                av_store(sr + jj, exp2_neg(av_sub(av_load(sr + jj), offv)));
            float sum = 0.0f;
            for (int jj = a; jj < e; jj++) sum += sr[jj];
            float tmp[AV_LEN];
            av_store(tmp, exp2_neg(av_set1(w->m[r] - off)));
            const float al = tmp[0];
            w->l[r] = fmaf(w->l[r], al, sum);
            w->m[r] = mx;
            als[ir] = al;
        }
        /* P·V: runs of up to FEW_PVR rows that see the same keys together */
        const float *vt = vb + (ptrdiff_t)j0 * p->ldv;
        const uint16_t *vth = vbh ? vbh + (ptrdiff_t)j0 * p->ldv : NULL;
        for (int ir = 0; ir < nvis;) {
            const int r = vis[ir];
            const int a = ATTN_MAX(w->lo[r], j0) - j0, e = ATTN_MIN(w->hi[r], j0 + jb) - j0;
            int n = 1;
            while (nv <= FEW_PVR_NV && n < FEW_PVR && ir + n < nvis &&
                   ATTN_MAX(w->lo[vis[ir + n]], j0) - j0 == a &&
                   ATTN_MIN(w->hi[vis[ir + n]], j0 + jb) - j0 == e)
                n++;
            if (n == 1) {
                few_pv(w->s + (size_t)r * BLK_MAX, vt, vth, p->ldv, a, e, nv, full, tm, als[ir],
                       w->pv, w->o + (size_t)r * dp);
            } else {
                const float *ps[FEW_PVR];
                float *os[FEW_PVR];
                for (int i = 0; i < n; i++) {
                    ps[i] = w->s + (size_t)vis[ir + i] * BLK_MAX;
                    os[i] = w->o + (size_t)vis[ir + i] * dp;
                }
                few_pvr_fns[vth != NULL][n - 2][nv - 1](ps, vth ? (const void *)vth : (const void *)vt,
                                                        p->ldv, a, e, full, tm, als + ir, os);
            }
            ir += n;
        }
    }
    for (int r = 0; r < R; r++) { /* o = acc / l; rows that saw no key get 0 */
        const int h = g * G->grp + r / Tq, i = r % Tq;
        float *orow = o + b * G->sbo + (ptrdiff_t)i * p->ldo + (ptrdiff_t)h * D;
        const av_f inv = av_set1(w->l[r] > 0.0f ? 1.0f / w->l[r] : 0.0f);
        const float *wo = w->o + (size_t)r * dp;
        for (int vv = 0; vv < full; vv++)
            av_store(orow + vv * AV_LEN, av_mul(av_load(wo + vv * AV_LEN), inv));
        if (full < nv)
            av_store_mask(orow + full * AV_LEN, tm, av_mul(av_load(wo + full * AV_LEN), inv));
        if (lse)
            lse[((size_t)b * p->H + h) * p->Tq + i] =
                w->l[r] > 0.0f ? (float)((double)w->m[r] * LN2 + log((double)w->l[r]))
                               : -__builtin_inff();
    }
    if (!probs) return;
    /* probabilities 2^(s − lse2) of the visible keys from the same scores, 0 elsewhere */
    for (int r = 0; r < R; r++) {
        const int h = g * G->grp + r / Tq, i = r % Tq;
        float *pr = probs + (((size_t)b * p->H + h) * p->Tq + i) * p->Tk;
        memset(pr, 0, sizeof(float) * p->Tk);
    }
    for (int j0 = jbeg; j0 < jend; j0 += bc) {
        const int jb = ATTN_MIN(bc, jend - j0);
        if (!ktsrc) transpose_scaled(kb + (ptrdiff_t)j0 * p->ldk, p->ldk, jb, D, w->kt, bc, 1.0f);
        const void *kt = ktbh  ? (const void *)(ktbh + j0)
                         : ktb ? (const void *)(ktb + j0)
                               : (const void *)w->kt;
        for (int r = 0; r < R; r++) {
            const int a = ATTN_MAX(w->lo[r], j0) - j0, e = ATTN_MIN(w->hi[r], j0 + jb) - j0;
            if (a >= e || !(w->l[r] > 0.0f)) continue;
            const int h = g * G->grp + r / Tq, i = r % Tq;
            float *pr = probs + (((size_t)b * p->H + h) * p->Tq + i) * p->Tk + j0;
            const av_f lse2 = av_set1((float)((double)w->m[r] + log2((double)w->l[r])));
            float *sr = w->s + (size_t)r * BLK_MAX;
            few_scores_rows(w->q, D, &r, 1, kt, ktbh != NULL, ldt, a / AV_LEN,
                            (e + AV_LEN - 1) / AV_LEN, w->s);
            few_row_mask(sr, a, e, -__builtin_inff());
            for (int jj = a / AV_LEN * AV_LEN; jj < e; jj += AV_LEN)
                av_store(sr + jj, exp2_neg(av_sub(av_load(sr + jj), lse2)));
            memcpy(pr + a, sr + a, sizeof(float) * (size_t)(e - a));
        }
    }
}

/* Whether a call with enough work to share (want) opens its own parallel region: not inside
 * another one (ragged attention runs one call per sequence on its team's threads; data-parallel
 * training, one replica per thread), where libgomp would still build and free a one-thread team
 * for the inactive nested region, ~480 times a 16-slot SmolLM2 decoding step. */
static bool may_fork(bool want) {
#ifdef _OPENMP
    return want && !omp_in_parallel();
#else
    return (void)want, false;
#endif
}

void ATTN_FN(attn_attention_forward)(const attn_attention_params *p,
                                     const float *q,  // (B, Tq, H, D) row stride ldq, batch sbq
                                     const float *k,  // (B, Tk, H_kv, D) row stride ldk, batch sbk
                                     const float *v,  // (B, Tk, H_kv, D) row stride ldv, batch sbv
                                     float *o,        // (B, Tq, H, D) row stride ldo, batch sbo
                                     float *lse,      // (B, H, Tq) or NULL
                                     float *probs) {  // (B, H, Tq, Tk) or NULL
    if (p->D > ATTN_SIMD_DMAX) {
        attn_attention_forward_ref(p, q, k, v, o, lse, probs);
        return;
    }
    const tiling t = make_tiling(p->D);
    const geom G = make_geom(p);
    if (few_path(p, &G)) {
        const long items = (long)p->B * G.hkv;
        const double macs = (double)items * G.grp * p->Tq * p->Tk * p->D;
        if (!may_fork(items > 1 && macs >= 65536.0)) {
            few_tiles w;
            for (long it = 0; it < items; it++)
                fwd_few(p, &t, &G, (int)(it / G.hkv), (int)(it % G.hkv), q, k, v, o, lse, probs,
                        &w);
            return;
        }
#pragma omp parallel
        {
            few_tiles w;
#pragma omp for schedule(static)
            for (long it = 0; it < items; it++)
                fwd_few(p, &t, &G, (int)(it / G.hkv), (int)(it % G.hkv), q, k, v, o, lse, probs,
                        &w);
        }
        return;
    }
    const int nqb = (p->Tq + t.br - 1) / t.br;
    const long items = (long)p->B * p->H * nqb;
    /* Dynamic schedule: causal query blocks differ in cost. Within a (b, h) the last (costliest)
     * blocks go first so the tail of the schedule is made of cheap items. */
    if (!may_fork(items > 1)) {
        fwd_tiles w;
        for (long it = 0; it < items; it++) {
            const int qb = nqb - 1 - (int)(it % nqb);
            const long bh = it / nqb;
            fwd_block(p, &t, &G, (int)(bh / p->H), (int)(bh % p->H), qb * t.br, q, k, v, o, lse,
                      probs, &w);
        }
        return;
    }
#pragma omp parallel
    {
        fwd_tiles w;
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < items; it++) {
            const int qb = nqb - 1 - (int)(it % nqb);
            const long bh = it / nqb;
            fwd_block(p, &t, &G, (int)(bh / p->H), (int)(bh % p->H), qb * t.br, q, k, v, o, lse,
                      probs, &w);
        }
    }
}

/* ---- backward --------------------------------------------------------------------------------- */

typedef struct {
    _Alignas(64) float qt[TILE_FLOATS];  /* (D, br) queries · scale·log2 e, transposed */
    _Alignas(64) float dot[TILE_FLOATS]; /* (D, br) dO, transposed */
    _Alignas(64) float qr[TILE_FLOATS];  /* (br, dp) query rows, padded (when D % L != 0) */
    _Alignas(64) float dor[TILE_FLOATS]; /* (br, dp) dO rows, padded (when D % L != 0) */
    _Alignas(64) float kr[TILE_FLOATS];  /* (bc, dp) key rows, padded (when D % L != 0) */
    _Alignas(64) float dq[TILE_FLOATS];  /* (br, dp) dQ accumulator */
    _Alignas(64) float st[ST_FLOATS];    /* (bc, br) scores, then P */
    _Alignas(64) float dpt[ST_FLOATS];   /* (bc, br) dP, then dS · scale */
    _Alignas(64) float lse2[BLK_MAX];    /* (br) lse · log2 e; +inf for empty or padded rows */
    _Alignas(64) float di[BLK_MAX];      /* (br) rowsum(dO ∘ O) */
} bwd_tiles;

/* One work item: (batch b, K/V head kvh) with every query head of its group, so that dK and dV
 * of the K/V head have a single writer: zeroed once here, then accumulated over the heads. */
static void bwd_group(const attn_attention_params *p, const tiling *t, const geom *G, int b,
                      int kvh, const float *q, const float *k, const float *v, const float *o,
                      const float *lse, const float *do_, float *dq, float *dk, float *dv,
                      bwd_tiles *w) {
    const int D = p->D, br = t->br, dp = t->dp;
    const ptrdiff_t gd = (ptrdiff_t)kvh * D;
    const bool direct = D % AV_LEN == 0; /* rows can feed the micro-kernel unpadded */
    const float *kb = k + b * G->sbk + gd; /* (Tk, D) stride ldk */
    const float *vb = v + b * G->sbv + gd; /* (Tk, D) stride ldv */
    float *dkb = dk + b * G->sbk + gd;     /* (Tk, D) stride ldk */
    float *dvb = dv + b * G->sbv + gd;     /* (Tk, D) stride ldv */
    const float c2 = (float)(p->scale * LOG2E);

    for (int j = 0; j < p->Tk; j++) {
        memset(dkb + (size_t)j * p->ldk, 0, sizeof(float) * D);
        memset(dvb + (size_t)j * p->ldv, 0, sizeof(float) * D);
    }

    for (int h = kvh * G->grp; h < (kvh + 1) * G->grp; h++) {
        const ptrdiff_t hd = (ptrdiff_t)h * D;
        const float *lseb = lse + ((size_t)b * p->H + h) * p->Tq; /* (Tq) */
        /* (Tq, Tk) dense, or NULL when not asked for */
        float *dbb = p->bias && p->dbias ? p->dbias + ((size_t)b * p->H + h) * p->Tq * p->Tk
                                         : NULL;
        for (int i0 = 0; i0 < p->Tq; i0 += br) {
            const int ib = ATTN_MIN(br, p->Tq - i0);
            const float *qb = q + b * G->sbq + (ptrdiff_t)i0 * p->ldq + hd;    /* (ib, D) */
            const float *ob = o + b * G->sbo + (ptrdiff_t)i0 * p->ldo + hd;    /* (ib, D) */
            const float *dob = do_ + b * G->sbo + (ptrdiff_t)i0 * p->ldo + hd; /* (ib, D) */
            float *dqb = dq + b * G->sbq + (ptrdiff_t)i0 * p->ldq + hd;        /* (ib, D) */
            const float *bb = bias_at(p, b, h, i0); /* (ib, Tk) row stride bias_sq, or NULL */
            float *dbi = dbb ? dbb + (size_t)i0 * p->Tk : NULL; /* (ib, Tk) */
            /* Entries of dbias outside the visited tiles are masked: 0. */
            if (dbi) memset(dbi, 0, sizeof(float) * (size_t)ib * p->Tk);
            const int jbeg = key_begin(p, i0), jend = key_end(p, b, i0, ib);
            if (jend <= jbeg) {
                for (int i = 0; i < ib; i++)
                    memset(dqb + (size_t)i * p->ldq, 0, sizeof(float) * D);
                continue;
            }

            pack_transposed(qb, p->ldq, ib, D, br, c2, w->qt);
            pack_transposed(dob, p->ldo, ib, D, br, 1.0f, w->dot);
            const float *qrows = qb, *dorows = dob;
            ptrdiff_t ldqr = p->ldq, ldor = p->ldo;
            if (!direct) {
                pack_rows(qb, p->ldq, ib, D, dp, w->qr);
                pack_rows(dob, p->ldo, ib, D, dp, w->dor);
                qrows = w->qr;
                dorows = w->dor;
                ldqr = ldor = dp;
            }
            for (int i = 0; i < br; i++) {
                float l2 = __builtin_inff(), di = 0.0f;
                if (i < ib && lseb[i0 + i] > -__builtin_inff()) {
                    l2 = (float)((double)lseb[i0 + i] * LOG2E);
                    di = row_dot(dob + (size_t)i * p->ldo, ob + (size_t)i * p->ldo, D);
                }
                w->lse2[i] = l2;
                w->di[i] = di;
            }
            memset(w->dq, 0, sizeof(float) * (size_t)ib * dp);

            for (int j0 = jbeg; j0 < jend; j0 += t->bc) {
                const int jb = ATTN_MIN(t->bc, jend - j0);
                const float *kj = kb + (size_t)j0 * p->ldk;
                const tile g = make_tile(p, i0, ib, j0, jb);
                score_tile(p, t, &g, kj, bb ? bb + j0 : NULL, w->qt, w->st);
                /* dPt (jb, br) = V_j · dOt */
                key_rows_gemm(t, &g, D, vb + (size_t)j0 * p->ldv, p->ldv, w->dot, w->dpt);
                /* Pt = 2^(St − lse2), dSt = Pt ∘ (dPt − D) · scale. With dbias, dSt is first
                 * left unscaled, copied out, then scaled: the same product either way. */
                const av_f sc = av_set1(p->scale);
                for (int jj = 0; jj < jb; jj++) {
                    float *srow = w->st + (size_t)jj * br, *drow = w->dpt + (size_t)jj * br;
                    const int lo = lo_vec(t, &g, jj / SUB * SUB); /* lanes below: skipped, P = 0 */
                    for (int vv = 0; vv < lo; vv++) {
                        av_store(srow + vv * AV_LEN, av_zero());
                        av_store(drow + vv * AV_LEN, av_zero());
                    }
                    for (int vv = lo; vv < t->nvq; vv++) {
                        av_f pr = exp2_neg(av_sub(av_load(srow + vv * AV_LEN),
                                                  av_load(w->lse2 + vv * AV_LEN)));
                        av_f ds = av_mul(pr, av_sub(av_load(drow + vv * AV_LEN),
                                                    av_load(w->di + vv * AV_LEN)));
                        if (!dbi) ds = av_mul(ds, sc);
                        av_store(srow + vv * AV_LEN, pr);
                        av_store(drow + vv * AV_LEN, ds);
                    }
                }
                if (dbi) {
                    /* dbias = dS (the bias is added after the scale): rows i, columns j. */
                    transpose_scaled(w->dpt, br, jb, ib, dbi + j0, p->Tk, 1.0f);
                    for (int jj = 0; jj < jb; jj++) {
                        float *drow = w->dpt + (size_t)jj * br;
                        for (int vv = lo_vec(t, &g, jj / SUB * SUB); vv < t->nvq; vv++)
                            av_store(drow + vv * AV_LEN, av_mul(av_load(drow + vv * AV_LEN), sc));
                    }
                }
                /* dV_j += Pt · dO;  dK_j += dSt · Q  (rows j, k over queries; on a diagonal tile
                 * a key group only over the queries that can see it) */
                for (int s0 = 0; s0 < jb; s0 += g.diag ? SUB : jb) {
                    const int n = g.diag ? ATTN_MIN(SUB, jb - s0) : jb;
                    const int q0 = lo_vec(t, &g, s0) * AV_LEN;
                    if (q0 >= ib) continue;
                    gemm_blocks(n, t->nvd, ib - q0, w->st + (size_t)s0 * br + q0, br, 1,
                                dorows + q0 * ldor, ldor, dvb + (size_t)(j0 + s0) * p->ldv,
                                p->ldv, NULL, 1, t->dtail);
                    gemm_blocks(n, t->nvd, ib - q0, w->dpt + (size_t)s0 * br + q0, br, 1,
                                qrows + q0 * ldqr, ldqr, dkb + (size_t)(j0 + s0) * p->ldk,
                                p->ldk, NULL, 1, t->dtail);
                }
                /* dQ_i += dStᵀ · K_j  (rows i, k over keys; on a diagonal tile a query group
                 * only over the keys it can see) */
                const float *krows = kj;
                ptrdiff_t ldkr = p->ldk;
                if (!direct) {
                    pack_rows(kj, p->ldk, jb, D, dp, w->kr);
                    krows = w->kr;
                    ldkr = dp;
                }
                for (int u0 = 0; u0 < ib; u0 += g.diag ? SUB : ib) {
                    const int n = g.diag ? ATTN_MIN(SUB, ib - u0) : ib;
                    /* last query of the group sees keys jj <= u0 + n - 1 + i0 + off - j0 */
                    const long kmax = g.diag ? ATTN_MIN((long)jb, (long)u0 + n - g.hid0) : jb;
                    if (kmax <= 0) continue;
                    gemm_blocks(n, t->nvd, (int)kmax, w->dpt + u0, 1, br, krows, ldkr,
                                w->dq + (size_t)u0 * dp, dp, NULL, 1, AV_LEN);
                }
            }
            for (int i = 0; i < ib; i++)
                memcpy(dqb + (size_t)i * p->ldq, w->dq + (size_t)i * dp, sizeof(float) * D);
        }
    }
}

void ATTN_FN(attn_attention_backward)(const attn_attention_params *p,
                                      const float *q,   // (B, Tq, H, D) row stride ldq, batch sbq
                                      const float *k,   // (B, Tk, H_kv, D) row stride ldk, batch sbk
                                      const float *v,   // (B, Tk, H_kv, D) row stride ldv, batch sbv
                                      const float *o,   // (B, Tq, H, D) row stride ldo, batch sbo
                                      const float *lse, // (B, H, Tq)
                                      const float *do_, // (B, Tq, H, D) row stride ldo, batch sbo
                                      float *dq,        // (B, Tq, H, D) row stride ldq, batch sbq
                                      float *dk,        // (B, Tk, H_kv, D) row stride ldk, batch sbk
                                      float *dv) {      // (B, Tk, H_kv, D) row stride ldv, batch sbv
    if (p->D > ATTN_SIMD_DMAX) {
        attn_attention_backward_ref(p, q, k, v, o, lse, do_, dq, dk, dv);
        return;
    }
    const tiling t = make_tiling(p->D);
    const geom G = make_geom(p);
    const long items = (long)p->B * G.hkv;
    if (!may_fork(items > 1)) {
        bwd_tiles w;
        for (long bg = 0; bg < items; bg++)
            bwd_group(p, &t, &G, (int)(bg / G.hkv), (int)(bg % G.hkv), q, k, v, o, lse, do_, dq,
                      dk, dv, &w);
        return;
    }
#pragma omp parallel
    {
        bwd_tiles w;
#pragma omp for schedule(dynamic, 1)
        for (long bg = 0; bg < items; bg++)
            bwd_group(p, &t, &G, (int)(bg / G.hkv), (int)(bg % G.hkv), q, k, v, o, lse, do_, dq,
                      dk, dv, &w);
    }
}

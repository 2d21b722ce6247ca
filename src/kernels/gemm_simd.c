/* gemm_simd.c — the optimized GEMM, C = act(alpha·op(A)·op(B) + beta·C + bias), compiled once per
 * ISA (ATTN_ISA == 512: AVX-512, ATTN_ISA == 2: AVX2 + FMA; see kernels-impl.h).
 *
 * Design (the classic Goto/BLIS layering, written for row-major C):
 *   - The work is split once into one rectangle of C per OpenMP thread (along M when there are
 *     enough rows, else along N), and each thread then runs the whole blocked algorithm on its
 *     rectangle with its own pack buffers: no barriers and no shared writes.
 *   - Loops, outermost first: jc over NC columns, pc over KC of the K dimension, ic over MC rows;
 *     the KC×NC block of op(B) is packed into NR-wide column panels and the MC×KC block of op(A)
 *     into MR-tall row panels, zero-padded at the edges, so the microkernel reads both
 *     contiguously whatever the transposes and leading dimensions were. Transposing packs go
 *     through in-register AV_LEN×AV_LEN transposes.
 *   - Inside: jr over NR-wide panels of B (one panel, KC·NR floats, is reused from L1 by every
 *     row panel of the block) and ir over MR-tall panels of A (the MC×KC block stays in L2).
 *     K is split into equal blocks of at most KC; the block sizes were tuned on Zen 5 (48 KB L1,
 *     1 MB L2 per core) against PyTorch/MKL, interleaving the runs to cancel machine noise.
 *   - The microkernel keeps an MR×NR tile of C in registers (AVX-512: 14×32 = 28 zmm
 *     accumulators; AVX2: 6×16 = 12 ymm), one broadcast of A times two vectors of B per row and k.
 *   - The epilogue is fused: on the first K block it applies alpha and beta (beta == 0 never
 *     reads C), later K blocks accumulate, and the last one adds the bias and applies the
 *     activation to the tile while it is still in L1. */
#include "kernels-impl.h"
#include "vmath.h"

#include <pthread.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Blocking parameters (KC, MC_MAX, NC_MAX, PARALLEL_MIN_MACS may be overridden with -D when
 * tuning). */
#if ATTN_ISA == 512
#define MR 14       /* rows of the register tile: 14×2 accumulators + 2 B vectors + 1 broadcast */
#ifndef KC
#define KC 512      /* K block (a B panel, KC·NR·4 = 64 KB, streams through L1 from L2) */
#endif
#ifndef MC_MAX
#define MC_MAX 224  /* rows of A per packed block (16 panels, 448 KB: inside the 1 MB L2) */
#endif
#else
#define MR 6        /* 6×2 ymm accumulators + 2 B vectors + 1 broadcast = 15 of 16 registers */
#ifndef KC
#define KC 384      /* B panel 24 KB */
#endif
#ifndef MC_MAX
#define MC_MAX 144  /* 24 panels, 216 KB */
#endif
#endif
#define NR (2 * AV_LEN) /* columns of the register tile: two vectors */
#ifndef NC_MAX
#define NC_MAX 1536     /* columns of B per packed block */
#endif

/* Below this many multiply-adds a single thread wins over waking the OpenMP team. */
#ifndef PARALLEL_MIN_MACS
#define PARALLEL_MIN_MACS (64 * 64 * 64)
#endif

typedef struct {
    bool trans_a, trans_b;
    int M, N, K;
    float alpha, beta;
    const float *A; // (M, K), or (K, M) if trans_a
    const float *B; // (K, N), or (N, K) if trans_b
    float *C;       // (M, N)
    const float *bias; // (N) or NULL
    int lda, ldb, ldc;
    attn_act act;
    /* NULL, or op(B) given row by row by a producer (attn_gemm_rows; then trans_b, B unused) */
    const attn_gemm_rowsrc *src;
} gemm_args;

/* ---- packing ------------------------------------------------------------------------------- */

/* In-register transpose of an AV_LEN×AV_LEN block: on return r[c] holds what was column c. */
#if ATTN_ISA == 512
static inline void transpose_regs(av_f r[16]) {
    av_f a[16], b[16];
    /* Interleave row pairs within each 128-bit lane. */
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* b[4g+q], 128-bit lane L: column 4L+q of rows 4g..4g+3. */
    for (int g = 0; g < 4; g++) {
        __m512d a0 = _mm512_castps_pd(a[4 * g]), a1 = _mm512_castps_pd(a[4 * g + 1]);
        __m512d a2 = _mm512_castps_pd(a[4 * g + 2]), a3 = _mm512_castps_pd(a[4 * g + 3]);
        b[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    /* Gather lane L of b[q], b[4+q], b[8+q], b[12+q] into column 4L+q. */
    for (int q = 0; q < 4; q++) {
        av_f c0 = _mm512_shuffle_f32x4(b[q], b[4 + q], _MM_SHUFFLE(2, 0, 2, 0));
        av_f c1 = _mm512_shuffle_f32x4(b[q], b[4 + q], _MM_SHUFFLE(3, 1, 3, 1));
        av_f c2 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], _MM_SHUFFLE(2, 0, 2, 0));
        av_f c3 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], _MM_SHUFFLE(3, 1, 3, 1));
        r[q] = _mm512_shuffle_f32x4(c0, c2, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + q] = _mm512_shuffle_f32x4(c1, c3, _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + q] = _mm512_shuffle_f32x4(c0, c2, _MM_SHUFFLE(3, 1, 3, 1));
        r[12 + q] = _mm512_shuffle_f32x4(c1, c3, _MM_SHUFFLE(3, 1, 3, 1));
    }
}
#else
static inline void transpose_regs(av_f r[8]) {
    av_f a[8], b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; g++) {
        __m256d a0 = _mm256_castps_pd(a[4 * g]), a1 = _mm256_castps_pd(a[4 * g + 1]);
        __m256d a2 = _mm256_castps_pd(a[4 * g + 2]), a3 = _mm256_castps_pd(a[4 * g + 3]);
        b[4 * g + 0] = _mm256_castpd_ps(_mm256_unpacklo_pd(a0, a2));
        b[4 * g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a0, a2));
        b[4 * g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(a1, a3));
        b[4 * g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(a1, a3));
    }
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2f128_ps(b[q], b[4 + q], 0x20);
        r[4 + q] = _mm256_permute2f128_ps(b[q], b[4 + q], 0x31);
    }
}
#endif

/* Transpose a rows×cols block (both <= AV_LEN) of src (row stride ld): dst[c·dld + r] = src[r·ld
 * + c] for c < cols and the lanes r in keep; rows >= `rows` are written as zeros (padding).
 * full: every column stored whole, all AV_LEN lanes (a plain store: AVX2's masked store is
 * microcoded and slow on AMD), lanes past keep's as zeros. The caller then knows that they land
 * on floats it writes afterwards (the next column when dld < AV_LEN) or on slack. */
static inline void transpose_block(const float *src, size_t ld, int rows, int cols, float *dst,
                                   int dld, av_mask keep, bool full) {
    av_f r[AV_LEN];
    if (cols == AV_LEN) {
        for (int i = 0; i < AV_LEN; i++) r[i] = i < rows ? av_load(src + i * ld) : av_zero();
    } else {
        av_mask cm = av_tail(cols);
        for (int i = 0; i < AV_LEN; i++)
            r[i] = i < rows ? av_load_mask(src + i * ld, cm) : av_zero();
    }
    transpose_regs(r);
    if (full)
        for (int c = 0; c < cols; c++) av_store(dst + (size_t)c * dld, r[c]);
    else
        for (int c = 0; c < cols; c++) av_store_mask(dst + (size_t)c * dld, keep, r[c]);
}

/* Rows of op(A)/op(B) copied per sweep across all panels by the non-transposing packs: the
 * source is read a few whole row segments at a time (sequential, few pages live) instead of
 * panel by panel, which would touch a new page per k when rows are long. */
#define PACK_KCHUNK 8

/* Pack rows [i0, i0+mc) × columns [k0, k0+kc) of op(A) into MR-tall panels:
 * dst[p·kc·MR + k·MR + r] = op(A)(i0 + p·MR + r, k0 + k), zero for rows past mc. */
static void pack_a(const gemm_args *g, int i0, int mc, int k0, int kc, float *dst) {
    const av_mask keep = av_tail(MR);
    const size_t lda = (size_t)g->lda;
    if (g->trans_a) {
        /* A is (K, M): at fixed k, the mc rows of the block are contiguous. */
        for (int kk = 0; kk < kc; kk += PACK_KCHUNK) {
            int kn = ATTN_MIN(PACK_KCHUNK, kc - kk);
            for (int p = 0; p * MR < mc; p++) {
                av_mask m = av_tail(ATTN_MIN(MR, mc - p * MR));
                const float *src = g->A + (size_t)(k0 + kk) * lda + i0 + p * MR;
                float *d = dst + (size_t)p * kc * MR + (size_t)kk * MR;
                for (int k = 0; k < kn; k++)
                    av_store_mask(d + (size_t)k * MR, keep, av_load_mask(src + k * lda, m));
            }
        }
        return;
    }
    /* A is (M, K): transpose AV_LEN-wide blocks of MR rows. Where MR < AV_LEN (AVX2) the
     * columns are stored whole: each spills AV_LEN − MR zeros onto the next column's start, which
     * is written next (the next block's first column, the next panel's first k), and the last
     * one onto the buffer's slack (pack_a_span). */
    for (int p = 0; p * MR < mc; p++, dst += (size_t)kc * MR) {
        const float *src = g->A + (size_t)(i0 + p * MR) * lda + k0;
        int mr = ATTN_MIN(MR, mc - p * MR);
        for (int k = 0; k < kc; k += AV_LEN)
            transpose_block(src + k, lda, mr, ATTN_MIN(AV_LEN, kc - k), dst + (size_t)k * MR, MR,
                            keep, MR < AV_LEN);
    }
}

/* Pack rows [k0, k0+kc) × columns [j0, j0+nc) of op(B) into NR-wide panels:
 * dst[p·kc·NR + k·NR + c] = op(B)(k0 + k, j0 + p·NR + c), zero for columns past nc.
 * With a row producer (g->src) its rows go through a scratch of AV_LEN × kc floats that follows
 * the panels in dst (pack_b_floats counts it). */
static void pack_b(const gemm_args *g, int k0, int kc, int j0, int nc, float *dst) {
    const size_t ldb = (size_t)g->ldb;
    if (!g->trans_b) {
        /* B is (K, N): a panel row is NR contiguous floats of a row of B. */
        for (int kk = 0; kk < kc; kk += PACK_KCHUNK) {
            int kn = ATTN_MIN(PACK_KCHUNK, kc - kk);
            for (int p = 0; p * NR < nc; p++) {
                int nr = ATTN_MIN(NR, nc - p * NR);
                const float *src = g->B + (size_t)(k0 + kk) * ldb + j0 + p * NR;
                float *d = dst + (size_t)p * kc * NR + (size_t)kk * NR;
                if (nr == NR) {
                    for (int k = 0; k < kn; k++) {
                        av_store(d + (size_t)k * NR, av_load(src + k * ldb));
                        av_store(d + (size_t)k * NR + AV_LEN, av_load(src + k * ldb + AV_LEN));
                    }
                } else {
                    av_mask m0 = av_tail(ATTN_MIN(nr, AV_LEN));
                    av_mask m1 = av_tail(ATTN_MAX(nr - AV_LEN, 0));
                    for (int k = 0; k < kn; k++) {
                        av_store(d + (size_t)k * NR, av_load_mask(src + k * ldb, m0));
                        av_store(d + (size_t)k * NR + AV_LEN,
                                 av_load_mask(src + k * ldb + AV_LEN, m1));
                    }
                }
            }
        }
        return;
    }
    /* B is (N, K): transpose AV_LEN×AV_LEN blocks, each half of a panel separately. */
    const av_mask all = av_tail(AV_LEN);
    float *rows_tmp = dst + (size_t)kc * (size_t)((nc + NR - 1) / NR * NR);
    for (int p = 0; p * NR < nc; p++, dst += (size_t)kc * NR) {
        int nr = ATTN_MIN(NR, nc - p * NR);
        for (int h = 0; h < 2; h++) {
            int rows = ATTN_MAX(0, ATTN_MIN(AV_LEN, nr - h * AV_LEN));
            if (rows == 0) { /* a half panel entirely past the last row of B: padding */
                for (int k = 0; k < kc; k++)
                    av_store(dst + (size_t)k * NR + h * AV_LEN, av_zero());
                continue;
            }
            const int j = j0 + p * NR + h * AV_LEN;
            const float *src = g->B + (size_t)j * ldb + k0;
            size_t ld = ldb;
            if (g->src) { /* the producer's rows j .. j + rows, columns k0 .. k0 + kc */
                g->src->rows(g->src->ctx, j, rows, k0, kc, rows_tmp);
                src = rows_tmp;
                ld = (size_t)kc;
            }
            for (int k = 0; k < kc; k += AV_LEN)
                transpose_block(src + k, ld, rows, ATTN_MIN(AV_LEN, kc - k),
                                dst + (size_t)k * NR + h * AV_LEN, NR, all, true);
        }
    }
}

/* ---- microkernel --------------------------------------------------------------------------- */

typedef struct {
    float alpha, beta;
    bool first; /* first K block: C = alpha·acc + beta·C (C unread when beta == 0) */
    bool last;  /* last K block: then + bias, then the activation */
    attn_act act;
} epilogue;


/* The activation in a second sweep over an mr×nr tile of C (still in L1), which keeps the long
 * GELU code out of the register-hungry kernels. */
static void act_sweep(float *c, int ldc, int mr, int nr, attn_act act) {
    for (int r = 0; r < mr; r++) {
        float *cr = c + (size_t)r * ldc;
        for (int j = 0; j < nr; j += AV_LEN) {
            if (nr - j >= AV_LEN) {
                av_store(cr + j, av_act(av_load(cr + j), act));
            } else {
                av_mask m = av_tail(nr - j);
                av_store_mask(cr + j, m, av_act(av_load_mask(cr + j, m), act));
            }
        }
    }
}

/* One vector of a C row: combine the accumulator with C per the epilogue and store it. */
/* Always inlined: called 28 times per tile, a call each would cost ~10% at small K. */
static inline __attribute__((always_inline)) void store_vec(float *c, av_f acc,
                                                            const epilogue *e, av_f bias,
                                                            av_mask m, bool full) {
    av_f v = av_mul(acc, av_set1(e->alpha));
    if (!e->first || e->beta != 0.0f) {
        av_f old = full ? av_load(c) : av_load_mask(c, m);
        v = e->first ? av_fmadd(old, av_set1(e->beta), v) : av_add(old, v);
    }
    if (e->last) v = av_add(v, bias);
    if (full)
        av_store(c, v);
    else
        av_store_mask(c, m, v);
}

/* C tile (mr, nr) at c (row stride ldc) op= the product of the packed A panel a (kc, MR) and
 * the packed B panel b (kc, NR). bias points at the tile's first column (or is NULL).
 *
 * One kernel per row count R = 1..MR (MK_DEFINE below, picked from mk_table by mr): a panel of R
 * rows costs R rows of multiply-adds instead of MR (a 30-row sentence is 14 + 14 + 2 rows, not
 * 14 + 14 + 14). The A panel keeps its MR-row layout whatever R is, and every element of C sums
 * over k in the same order with the same epilogue, so the results do not depend on which kernel
 * ran: they are those of the MR-row kernel, bit for bit. Each kernel is its own function, not
 * inlined: the 2·R accumulators get the whole register file (inlined into the driver, gcc spilled
 * one inside the k loop). */
typedef void (*microkernel_fn)(int kc, const float *restrict a, const float *restrict b,
                               const float *pf, float *c, int ldc, int mr, int nr,
                               const epilogue *e, const float *bias);

#define MK_DECLARE(r) av_f c##r##_0 = av_zero(), c##r##_1 = av_zero();
#define MK_STEP(r)                                                                               \
    {                                                                                            \
        av_f ar = av_set1(a[r]);                                                                 \
        c##r##_0 = av_fmadd(ar, b0, c##r##_0);                                                   \
        c##r##_1 = av_fmadd(ar, b1, c##r##_1);                                                   \
    }
#define MK_STORE(r)                                                                              \
    if (r < mr) {                                                                                \
        store_vec(c + (size_t)r * ldc, c##r##_0, e, bias0, m0, full);                            \
        if (nr > AV_LEN) store_vec(c + (size_t)r * ldc + AV_LEN, c##r##_1, e, bias1, m1, full);  \
    }
/* The next B panel, NR floats per k, into L2 while this one is computed (a packed weight matrix
 * streams from memory once per call); pf = b re-touches the current panel (in L1: no traffic). */
#if ATTN_ISA == 512
#define MK_PREFETCH(p)                                                                           \
    (_mm_prefetch((const char *)(p), _MM_HINT_T1),                                              \
     _mm_prefetch((const char *)((p) + AV_LEN), _MM_HINT_T1))
#else
#define MK_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
#endif
/* The tile's accumulators c<r>_0, c<r>_1 into C: alpha, beta, bias, then the activation. */
#define MK_EPILOGUE(ROWS)                                                                        \
    bool full = nr == NR;                                                                        \
    av_mask m0 = av_tail(ATTN_MIN(nr, AV_LEN)), m1 = av_tail(ATTN_MAX(nr - AV_LEN, 0));          \
    av_f bias0 = av_zero(), bias1 = av_zero();                                                   \
    if (e->last && bias) {                                                                       \
        bias0 = full ? av_load(bias) : av_load_mask(bias, m0);                                   \
        bias1 = full ? av_load(bias + AV_LEN) : av_load_mask(bias + AV_LEN, m1);                 \
    }                                                                                            \
    ROWS(MK_STORE)                                                                               \
    if (e->last && e->act != ATTN_ACT_NONE) act_sweep(c, ldc, mr, nr, e->act);
#define MK_DEFINE(name, ROWS)                                                                    \
    __attribute__((noinline)) static void name(int kc, const float *restrict a,                  \
                                               const float *restrict b, const float *pf,         \
                                               float *c, int ldc, int mr, int nr,                \
                                               const epilogue *e, const float *bias) {           \
        ROWS(MK_DECLARE)                                                                         \
        _Pragma("GCC unroll 4") for (int k = 0; k < kc; k++) {                                   \
            av_f b0 = av_load_aligned(b), b1 = av_load_aligned(b + AV_LEN);                      \
            MK_PREFETCH(pf);                                                                     \
            ROWS(MK_STEP)                                                                        \
            a += MR;                                                                             \
            b += NR;                                                                             \
            pf += NR;                                                                            \
        }                                                                                        \
        MK_EPILOGUE(ROWS)                                                                        \
    }

#define MK_R1(X) X(0)
#define MK_R2(X) MK_R1(X) X(1)
#define MK_R3(X) MK_R2(X) X(2)
#define MK_R4(X) MK_R3(X) X(3)
#define MK_R5(X) MK_R4(X) X(4)
#define MK_R6(X) MK_R5(X) X(5)
MK_DEFINE(microkernel_1, MK_R1)
MK_DEFINE(microkernel_2, MK_R2)
MK_DEFINE(microkernel_3, MK_R3)
MK_DEFINE(microkernel_4, MK_R4)
MK_DEFINE(microkernel_5, MK_R5)
MK_DEFINE(microkernel_6, MK_R6)
#if ATTN_ISA == 512
#define MK_R7(X) MK_R6(X) X(6)
#define MK_R8(X) MK_R7(X) X(7)
#define MK_R9(X) MK_R8(X) X(8)
#define MK_R10(X) MK_R9(X) X(9)
#define MK_R11(X) MK_R10(X) X(10)
#define MK_R12(X) MK_R11(X) X(11)
#define MK_R13(X) MK_R12(X) X(12)
#define MK_R14(X) MK_R13(X) X(13)
MK_DEFINE(microkernel_7, MK_R7)
MK_DEFINE(microkernel_8, MK_R8)
MK_DEFINE(microkernel_9, MK_R9)
MK_DEFINE(microkernel_10, MK_R10)
MK_DEFINE(microkernel_11, MK_R11)
MK_DEFINE(microkernel_12, MK_R12)
MK_DEFINE(microkernel_13, MK_R13)
MK_DEFINE(microkernel_14, MK_R14)
_Static_assert(MR == 14, "one kernel per row count up to MR");
static const microkernel_fn mk_table[MR + 1] = {
    NULL,           microkernel_1,  microkernel_2,  microkernel_3,  microkernel_4,
    microkernel_5,  microkernel_6,  microkernel_7,  microkernel_8,  microkernel_9,
    microkernel_10, microkernel_11, microkernel_12, microkernel_13, microkernel_14};
#else
_Static_assert(MR == 6, "one kernel per row count up to MR");
static const microkernel_fn mk_table[MR + 1] = {NULL,          microkernel_1, microkernel_2,
                                                microkernel_3, microkernel_4, microkernel_5,
                                                microkernel_6};
#endif

#if ATTN_ISA == 512
/* ---- BF16 microkernels (attn_gemm_bf16_run_avx512 below) ---------------------------------- */

/* The same tile as microkernel's, from bfloat16 operands: a holds MR pairs per k pair (one
 * uint32 per row: the even k in the low half), b 32 columns × 2 per k pair; VDPBF16PS adds both
 * exact products of a pair to the float32 accumulator. kp k pairs. */
#define BF16_FN __attribute__((target("avx512bf16")))
typedef void (*microkernel_bf16_fn)(int kp, const uint32_t *restrict a, const uint16_t *restrict b,
                                    const uint16_t *pf, float *c, int ldc, int mr, int nr,
                                    const epilogue *e, const float *bias);
#define MKB_STEP(r)                                                                              \
    {                                                                                            \
        __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[r]);                                     \
        c##r##_0 = _mm512_dpbf16_ps(c##r##_0, ar, b0);                                           \
        c##r##_1 = _mm512_dpbf16_ps(c##r##_1, ar, b1);                                           \
    }
#define MKB_DEFINE(name, ROWS)                                                                   \
    BF16_FN __attribute__((noinline)) static void name(                                          \
        int kp, const uint32_t *restrict a, const uint16_t *restrict b, const uint16_t *pf,      \
        float *c, int ldc, int mr, int nr, const epilogue *e, const float *bias) {               \
        ROWS(MK_DECLARE)                                                                         \
        _Pragma("GCC unroll 4") for (int q = 0; q < kp; q++) {                                   \
            __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);                                        \
            __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);                                   \
            _mm_prefetch((const char *)pf, _MM_HINT_T1);                                         \
            _mm_prefetch((const char *)(pf + 32), _MM_HINT_T1);                                  \
            ROWS(MKB_STEP)                                                                       \
            a += MR;                                                                             \
            b += 64;                                                                             \
            pf += 64;                                                                            \
        }                                                                                        \
        MK_EPILOGUE(ROWS)                                                                        \
    }
MKB_DEFINE(microkernel_bf16_1, MK_R1)
MKB_DEFINE(microkernel_bf16_2, MK_R2)
MKB_DEFINE(microkernel_bf16_3, MK_R3)
MKB_DEFINE(microkernel_bf16_4, MK_R4)
MKB_DEFINE(microkernel_bf16_5, MK_R5)
MKB_DEFINE(microkernel_bf16_6, MK_R6)
MKB_DEFINE(microkernel_bf16_7, MK_R7)
MKB_DEFINE(microkernel_bf16_8, MK_R8)
MKB_DEFINE(microkernel_bf16_9, MK_R9)
MKB_DEFINE(microkernel_bf16_10, MK_R10)
MKB_DEFINE(microkernel_bf16_11, MK_R11)
MKB_DEFINE(microkernel_bf16_12, MK_R12)
MKB_DEFINE(microkernel_bf16_13, MK_R13)
MKB_DEFINE(microkernel_bf16_14, MK_R14)
static const microkernel_bf16_fn mkb_table[MR + 1] = {
    NULL,                microkernel_bf16_1,  microkernel_bf16_2,  microkernel_bf16_3,
    microkernel_bf16_4,  microkernel_bf16_5,  microkernel_bf16_6,  microkernel_bf16_7,
    microkernel_bf16_8,  microkernel_bf16_9,  microkernel_bf16_10, microkernel_bf16_11,
    microkernel_bf16_12, microkernel_bf16_13, microkernel_bf16_14};
_Static_assert(NR == ATTN_BF16_NR, "BF16 panels are the kernel's NR columns wide");
#endif
#undef MK_DECLARE
#undef MK_STEP
#undef MK_STORE

/* The tile's kernel: mr (1..MR) rows. */
static inline void microkernel(int kc, const float *restrict a, const float *restrict b,
                               const float *pf, float *c, int ldc, int mr, int nr,
                               const epilogue *e, const float *bias) {
    mk_table[mr](kc, a, b, pf, c, ldc, mr, nr, e, bias);
}

/* ---- blocked driver ------------------------------------------------------------------------ */

/* The K block: at most KC, and K split into equal blocks (K = 384 is one block of 384 and
 * K = 1536 three of 512, rather than a full block plus a thin, inefficient remainder). */
static int kc_block(int K) {
    int nk = (K + KC - 1) / KC;
    return nk > 1 ? (K + nk - 1) / nk : K;
}
/* A call's K block: kc_block's, rounded up to a multiple of the row producer's grain (its
 * blocks start where the producer's do; K is a multiple of the grain). */
static int kc_of(const gemm_args *g) {
    const int kc = kc_block(g->K), grain = g->src ? g->src->kgrain : 1;
    return grain > 1 ? (kc + grain - 1) / grain * grain : kc;
}

/* Floats of A and B pack buffer one thread needs. */
static size_t pack_a_floats(const gemm_args *g) {
    int kc = kc_of(g);
    long mc = ATTN_MIN(MC_MAX, ((long)g->M + MR - 1) / MR * MR);
    return (size_t)mc * kc;
}
static size_t pack_b_floats(const gemm_args *g) {
    int kc = kc_of(g);
    long nc = ATTN_MIN(NC_MAX, ((long)g->N + NR - 1) / NR * NR);
    return (size_t)(nc + (g->src ? AV_LEN : 0)) * kc; /* + the producer's row scratch */
}

/* The calling thread's packing buffer of at least n floats (NULL when out of memory). It lives
 * until the thread exits; a call that needs more replaces it. GEMMs do not nest (the threaded
 * region never calls attn_gemm), so one buffer per calling thread suffices. */
static _Thread_local float *tl_pack;
static _Thread_local size_t tl_pack_n;
/* A thread-specific key whose destructor frees the buffer when its thread exits (OpenMP workers
 * that go away, threads of the caller's own): no buffer outlives its thread. */
static pthread_key_t pack_key;
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;
static bool pack_key_ok;
static void pack_free(void *p) { attn_free(p); }
static void pack_key_make(void) { pack_key_ok = pthread_key_create(&pack_key, pack_free) == 0; }
static float *pack_cache(size_t n) {
    if (n <= tl_pack_n) return tl_pack;
    pthread_once(&pack_once, pack_key_make);
    attn_free(tl_pack);
    tl_pack_n = 0;
    tl_pack = attn_alloc(n * sizeof(float));
    if (tl_pack) tl_pack_n = n;
    if (pack_key_ok) pthread_setspecific(pack_key, tl_pack);
    return tl_pack;
}

/* The whole blocked algorithm on rows [m0, m1) × columns [n0, n1) of C. */
static void gemm_rect(const gemm_args *g, int m0, int m1, int n0, int n1, float *abuf,
                      float *bbuf) {
    epilogue e = {g->alpha, g->beta, true, false, g->act};
    int kc_step = kc_of(g);
    for (int jc = n0; jc < n1; jc += NC_MAX) {
        int nc = ATTN_MIN(NC_MAX, n1 - jc);
        /* K == 0 still takes one pass: C = act(beta·C + bias). */
        for (int pc = 0;;) {
            int kc = ATTN_MIN(kc_step, g->K - pc);
            e.first = pc == 0;
            e.last = pc + kc >= g->K;
            pack_b(g, pc, kc, jc, nc, bbuf);
            for (int ic = m0; ic < m1; ic += MC_MAX) {
                int mc = ATTN_MIN(MC_MAX, m1 - ic);
                pack_a(g, ic, mc, pc, kc, abuf);
                for (int jr = 0; jr < nc; jr += NR) {
                    const float *bp = bbuf + (size_t)jr * kc;
                    const float *bias = g->bias ? g->bias + jc + jr : NULL;
                    for (int ir = 0; ir < mc; ir += MR)
                        microkernel(kc, abuf + (size_t)ir * kc, bp, bp,
                                    g->C + (size_t)(ic + ir) * g->ldc + jc + jr, g->ldc,
                                    ATTN_MIN(MR, mc - ir), ATTN_MIN(NR, nc - jr), &e, bias);
                }
            }
            pc += kc;
            if (pc >= g->K) break;
        }
    }
}

/* The team for a blocked GEMM (the caller's threads, or 1 inside a parallel region or below
 * PARALLEL_MIN_MACS; never more than the MR×NR tiles) in *nt, and the calling thread's pack buffer
 * for it, per_thread floats for each member: kept between calls (grown when a call needs more),
 * since allocating and freeing megabytes per call costs page faults and page clearing on every
 * GEMM. Short of memory the team shrinks to 1; NULL when even that does not fit. */
static float *team_buffers(const gemm_args *g, size_t per_thread, int *nt_out) {
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel() && (double)g->M * g->N * g->K >= (double)PARALLEL_MIN_MACS)
        nt = omp_get_max_threads();
#endif
    const long tiles = (((long)g->M + MR - 1) / MR) * (((long)g->N + NR - 1) / NR);
    if (nt > tiles) nt = (int)tiles;
    if (nt < 1) nt = 1;
    float *buf = pack_cache(per_thread * (size_t)nt);
    if (!buf && nt > 1) {
        nt = 1;
        buf = pack_cache(per_thread);
    }
    *nt_out = nt;
    return buf;
}

/* Thread t of nt: its rectangle of C. The team is arranged as tm×tn (tm·tn = nt) so that the
 * busiest thread has the fewest MR×NR tiles; among arrangements with as few, the one whose threads
 * each pack the fewest rows of A plus columns of B (M/tm + N/tn: a thread packs its rows of A and
 * its columns of B). So a tall product (training: M in the thousands, N a few hundred) splits M —
 * whole rows per thread, B packed by each — and a wide one (a prompt of a hundred tokens through a
 * weight of thousands of columns) splits N, each thread packing only its share of the weight; the
 * latter also reads a pre-packed B once in all rather than once per thread. Boundaries fall on tile
 * edges. Which thread computes a tile changes no result: every element sums in the same order. */
static void thread_rect(const gemm_args *g, int t, int nt, int *m0, int *m1, int *n0, int *n1) {
    long pm = ((long)g->M + MR - 1) / MR, pn = ((long)g->N + NR - 1) / NR;
    int best_tm = nt;
    long best = -1, best_pack = -1;
    for (int tm = nt; tm >= 1; tm--) {
        if (nt % tm) continue;
        int tn = nt / tm;
        long cost = ((pm + tm - 1) / tm) * ((pn + tn - 1) / tn);
        long pack = (pm + tm - 1) / tm * MR + (pn + tn - 1) / tn * NR;
        if (best < 0 || cost < best || (cost == best && pack < best_pack)) {
            best = cost;
            best_pack = pack;
            best_tm = tm;
        }
    }
    int tm = best_tm, tn = nt / tm;
    int ti = t / tn, tj = t % tn;
    *m0 = (int)ATTN_MIN(pm * ti / tm * MR, g->M);
    *m1 = (int)ATTN_MIN(pm * (ti + 1) / tm * MR, g->M);
    *n0 = (int)ATTN_MIN(pn * tj / tn * NR, g->N);
    *n1 = (int)ATTN_MIN(pn * (tj + 1) / tn * NR, g->N);
}

/* Inside a GEMM's region: the calling thread's rectangle of C (thread_rect over the team that
 * actually started, which may be smaller than asked for, never larger). Returns its number. */
static int my_rect(const gemm_args *g, int *m0, int *m1, int *n0, int *n1) {
    int t = 0, team = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    team = omp_get_num_threads();
#endif
    thread_rect(g, t, team, m0, m1, n0, n1);
    return t;
}

/* A driver's body on one thread's rectangle [m0, m1) × [n0, n1) of C, with that thread's pack
 * buffer and the driver's own data. */
typedef void (*rect_fn)(const gemm_args *g, int m0, int m1, int n0, int n1, float *buf,
                        const void *ctx);

/* The threaded part of every blocked driver: the team (team_buffers, per_thread floats of pack
 * buffer each), one region, each member's rectangle (my_rect) handed to body. false, having done
 * nothing, when even one thread's buffer does not fit: the caller then takes its fallback. */
static bool run_team(const gemm_args *g, size_t per_thread, rect_fn body, const void *ctx) {
    int nt;
    float *buf = team_buffers(g, per_thread, &nt);
    if (!buf) return false;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int m0, m1, n0, n1;
        const int t = my_rect(g, &m0, &m1, &n0, &n1);
        if (m0 < m1 && n0 < n1) body(g, m0, m1, n0, n1, buf + per_thread * (size_t)t, ctx);
    }
    return true;
}

/* Per-thread pack floats of A's MC×KC block and B's KC×NC block, each rounded to a cache line. */
/* A's has AV_LEN floats of slack for pack_a's whole-column stores. */
static size_t pack_a_span(const gemm_args *g) {
    return (pack_a_floats(g) + AV_LEN + 15) & ~(size_t)15;
}
static size_t pack_b_span(const gemm_args *g) { return (pack_b_floats(g) + 15) & ~(size_t)15; }

/* ---- small M: weight streaming ---------------------------------------------------------- */

/* With a handful of rows (M <= SMALL_M: token-by-token generation, where every call multiplies
 * one or a few activations by a whole weight matrix) the packed algorithm would copy all of B
 * into panels just to use it once: three passes over B where one is needed, and B is the
 * megabytes that bound the speed. The small-M path streams B exactly once, straight from its
 * own layout, with the work split across the threads:
 *   op(B) = B (K, N), M·N small (the usual case): split along K, whole rows of B streamed and
 *                      partial sums reduced in a fixed order (small_ks_*, below);
 *   op(B) = B (K, N), otherwise: columns split; C rows accumulate in L1 as axpys over K, each row
 *                      of B read as a contiguous segment of up to SMALL_NB columns (one row at a
 *                      time for narrow segments, four for wide ones: whichever streamed faster);
 *   op(B) = Bᵀ (B stored (N, K)):  every C element is a dot product of an A row with a B row,
 *                      one B row at a time, so B is read front to back.
 * Each C element sums over k in the same order whatever the thread count. */
#define SMALL_M 8
#define SMALL_NB 4096     /* most columns of a C block; SMALL_ACC floats of accumulators in all */
#define SMALL_ACC 8192    /* 32 KB: the block's M rows of accumulators stay in L1 */
#define SMALL_NARROW 1024 /* blocks up to this many columns read B one row at a time */

typedef struct {
    const gemm_args *g;
    const float *A; /* (M, K) row-major, row stride lda (A copied when trans_a) */
    int lda;
} small_args;

/* c (n) = act(alpha·acc (n) + beta·c + bias (n)); bias may be NULL, beta == 0 never reads c. */
void ATTN_FN(attn_gemm_store_row)(float *c, int n, const float *acc, float alpha, float beta,
                                  const float *bias, attn_act act) {
    av_store_row(c, n, acc, alpha, beta, bias, act);
}

/* The epilogue on C[m, j0 .. j0+n): C = act(alpha·acc + beta·C + bias). */
static inline void small_store(const gemm_args *g, int m, int j0, int n, const float *acc) {
    ATTN_FN(attn_gemm_store_row)(g->C + (size_t)m * g->ldc + j0, n, acc, g->alpha, g->beta,
                                 g->bias ? g->bias + j0 : NULL, g->act);
}

/* acc[m][0 .. nb) += Σ_k A[m, k] · B[k, jb ..], one row of B at a time: for a narrow block
 * (<= SMALL_NARROW columns, e.g. a thread's half of a 768-wide matrix) B is then read as one
 * sequential stream, which measured fastest. */
static inline __attribute__((always_inline)) void small_nn_ku1(const small_args *s, int Mc, int jb,
                                                               int nb, float *const *acc) {
    const gemm_args *g = s->g;
    const size_t ldb = (size_t)g->ldb;
    const int nfull = nb / AV_LEN * AV_LEN;
    const av_mask tm = av_tail(nb - nfull);
    for (int k = 0; k < g->K; k++) {
        const float *b0 = g->B + (size_t)k * ldb + jb;
        av_f a[SMALL_M];
        for (int m = 0; m < Mc; m++) a[m] = av_set1(s->A[(size_t)m * s->lda + k]);
        for (int j = 0; j < nfull; j += AV_LEN) {
            const av_f v = av_load(b0 + j);
            for (int m = 0; m < Mc; m++)
                av_store(acc[m] + j, av_fmadd(a[m], v, av_load_aligned(acc[m] + j)));
        }
        if (nfull < nb) {
            const av_f v = av_load_mask(b0 + nfull, tm);
            for (int m = 0; m < Mc; m++)
                av_store(acc[m] + nfull, av_fmadd(a[m], v, av_load_aligned(acc[m] + nfull)));
        }
    }
}

/* The same four rows of B at a time (a wide block: four streams, a quarter of the accumulator
 * traffic), measured fastest above SMALL_NARROW columns. */
static inline __attribute__((always_inline)) void small_nn_ku4(const small_args *s, int Mc, int jb,
                                                               int nb, float *const *acc) {
    const gemm_args *g = s->g;
    const int K = g->K;
    const size_t ldb = (size_t)g->ldb;
    const int nfull = nb / AV_LEN * AV_LEN;
    const av_mask tm = av_tail(nb - nfull);
    int k = 0;
    for (; k + 4 <= K; k += 4) {
        const float *b0 = g->B + (size_t)k * ldb + jb, *b1 = b0 + ldb, *b2 = b1 + ldb,
                    *b3 = b2 + ldb;
        av_f a[SMALL_M][4];
        for (int m = 0; m < Mc; m++)
            for (int u = 0; u < 4; u++) a[m][u] = av_set1(s->A[(size_t)m * s->lda + k + u]);
        for (int j = 0; j < nb; j += AV_LEN) {
            av_f v0, v1, v2, v3;
            if (j < nfull) {
                v0 = av_load(b0 + j), v1 = av_load(b1 + j), v2 = av_load(b2 + j);
                v3 = av_load(b3 + j);
            } else {
                v0 = av_load_mask(b0 + j, tm), v1 = av_load_mask(b1 + j, tm);
                v2 = av_load_mask(b2 + j, tm), v3 = av_load_mask(b3 + j, tm);
            }
            for (int m = 0; m < Mc; m++) {
                av_f c = av_load_aligned(acc[m] + j);
                c = av_fmadd(a[m][0], v0, c);
                c = av_fmadd(a[m][1], v1, c);
                c = av_fmadd(a[m][2], v2, c);
                c = av_fmadd(a[m][3], v3, c);
                av_store(acc[m] + j, c);
            }
        }
    }
    for (; k < K; k++) {
        const float *b0 = g->B + (size_t)k * ldb + jb;
        for (int m = 0; m < Mc; m++) {
            const av_f a0 = av_set1(s->A[(size_t)m * s->lda + k]);
            for (int j = 0; j < nb; j += AV_LEN) {
                const av_f v = j < nfull ? av_load(b0 + j) : av_load_mask(b0 + j, tm);
                av_store(acc[m] + j, av_fmadd(a0, v, av_load_aligned(acc[m] + j)));
            }
        }
    }
}

/* op(B) = B: columns [n0, n1) of C, all M rows. Mc is M as a compile-time constant after
 * inlining, so the row loops unroll. Accumulator rows are padded to whole vectors (the lanes
 * past nb are computed but never stored to C). */
static inline __attribute__((always_inline)) void small_nn_rows(const small_args *s, int Mc,
                                                                int n0, int n1) {
    /* Wide blocks (few passes over the rows of B, long contiguous reads) as M allows. */
    const int nbmax = ATTN_MIN(SMALL_NB, SMALL_ACC / Mc / AV_LEN * AV_LEN);
    float accbuf[SMALL_ACC] __attribute__((aligned(64)));
    float *acc[SMALL_M];
    for (int m = 0; m < Mc; m++) acc[m] = accbuf + (size_t)m * nbmax;
    for (int jb = n0; jb < n1; jb += nbmax) {
        const int nb = ATTN_MIN(nbmax, n1 - jb);
        const int nbv = (nb + AV_LEN - 1) / AV_LEN * AV_LEN;
        for (int m = 0; m < Mc; m++) memset(acc[m], 0, (size_t)nbv * sizeof(float));
        if (nb <= SMALL_NARROW)
            small_nn_ku1(s, Mc, jb, nb, acc);
        else
            small_nn_ku4(s, Mc, jb, nb, acc);
        for (int m = 0; m < Mc; m++) small_store(s->g, m, jb, nb, acc[m]);
    }
}

/* op(B) = Bᵀ (B stored (N, K)): C[m, n] for n in [n0, n1), all M rows: one row of B at a time
 * (one sequential stream; reading four rows at once measured ~25% slower), SMALL_NT_U(Mc)
 * vectors of k per step (four for M = 1) so that independent accumulator chains hide the FMA
 * latency. (Tiles of 4 rows of A x 2 rows of B, 6 loads per 8 FMAs instead of 9, measured on Zen 3 at
 * 8 x 1536 x 576: the same ~77 GMAC/s with B in the caches, 31-38 against ~47 with B from
 * memory, the decoding case, even with software prefetches: dropped.) */
#define SMALL_NT_U(mc) ((mc) <= 3 ? 2 : 1)
static inline __attribute__((always_inline)) void small_nt_rows(const small_args *s, int Mc,
                                                                int n0, int n1) {
    const gemm_args *g = s->g;
    const int K = g->K, U = SMALL_NT_U(Mc);
    const size_t ldb = (size_t)g->ldb;
    const int kfull = K / AV_LEN * AV_LEN, kstep = U * AV_LEN;
    const int kunr = K / kstep * kstep;
    const av_mask km = av_tail(K - kfull);
    const float *ar[SMALL_M];
    for (int m = 0; m < Mc; m++) ar[m] = s->A + (size_t)m * s->lda;
    /* Results of a strip of columns, then the vector epilogue on them. */
    float out[SMALL_M][64] __attribute__((aligned(64)));
    for (int jb = n0; jb < n1; jb += 64) {
        const int nb = ATTN_MIN(64, n1 - jb);
        for (int r = 0; Mc == 1 && r < nb; r++) {
            /* M = 1 (generation's output projection) spelled out: four chains in registers. */
            const float *b0 = g->B + (size_t)(jb + r) * ldb, *a = ar[0];
            av_f c0 = av_zero(), c1 = av_zero(), c2 = av_zero(), c3 = av_zero();
            int k = 0;
            for (; k + 4 * AV_LEN <= K; k += 4 * AV_LEN) {
                c0 = av_fmadd(av_load(a + k), av_load(b0 + k), c0);
                c1 = av_fmadd(av_load(a + k + AV_LEN), av_load(b0 + k + AV_LEN), c1);
                c2 = av_fmadd(av_load(a + k + 2 * AV_LEN), av_load(b0 + k + 2 * AV_LEN), c2);
                c3 = av_fmadd(av_load(a + k + 3 * AV_LEN), av_load(b0 + k + 3 * AV_LEN), c3);
            }
            for (; k < kfull; k += AV_LEN) c0 = av_fmadd(av_load(a + k), av_load(b0 + k), c0);
            if (kfull < K)
                c0 = av_fmadd(av_load_mask(a + kfull, km), av_load_mask(b0 + kfull, km), c0);
            out[0][r] = av_reduce_add(av_add(av_add(c0, c1), av_add(c2, c3)));
        }
        for (int r = 0; Mc > 1 && r < nb; r++) {
            const float *b0 = g->B + (size_t)(jb + r) * ldb;
            av_f acc[SMALL_M][4];
            for (int m = 0; m < Mc; m++)
                for (int u = 0; u < U; u++) acc[m][u] = av_zero();
            int k = 0;
            for (; k < kunr; k += kstep)
                for (int u = 0; u < U; u++) {
                    const av_f v = av_load(b0 + k + u * AV_LEN);
                    for (int m = 0; m < Mc; m++)
                        acc[m][u] = av_fmadd(av_load(ar[m] + k + u * AV_LEN), v, acc[m][u]);
                }
            for (; k < kfull; k += AV_LEN) {
                const av_f v = av_load(b0 + k);
                for (int m = 0; m < Mc; m++)
                    acc[m][0] = av_fmadd(av_load(ar[m] + k), v, acc[m][0]);
            }
            if (kfull < K) {
                const av_f v = av_load_mask(b0 + kfull, km);
                for (int m = 0; m < Mc; m++)
                    acc[m][0] = av_fmadd(av_load_mask(ar[m] + kfull, km), v, acc[m][0]);
            }
            for (int m = 0; m < Mc; m++) {
                av_f t = acc[m][0];
                for (int u = 1; u < U; u++) t = av_add(t, acc[m][u]);
                out[m][r] = av_reduce_add(t);
            }
        }
        for (int m = 0; m < Mc; m++) small_store(g, m, jb, nb, out[m]);
    }
}

static void small_rows(const small_args *s, int n0, int n1) {
    const bool tb = s->g->trans_b;
#define SMALL_CASE(mc)                                                                           \
    case mc:                                                                                     \
        if (tb)                                                                                  \
            small_nt_rows(s, mc, n0, n1);                                                        \
        else                                                                                     \
            small_nn_rows(s, mc, n0, n1);                                                        \
        break;
    switch (s->g->M) {
        SMALL_CASE(1)
        SMALL_CASE(2)
        SMALL_CASE(3)
        SMALL_CASE(4)
        SMALL_CASE(5)
        SMALL_CASE(6)
        SMALL_CASE(7)
        SMALL_CASE(8)
    default: break;
    }
#undef SMALL_CASE
}

/* op(B) = B (K, N) with few accumulators (M·N <= SMALL_KS_ACC, e.g. generation's QKV, c_proj,
 * c_fc and MLP c_proj at M = 1): split along K instead of N, so that each thread streams whole
 * rows of B — one contiguous stretch of memory, front to back. Splitting the columns instead
 * makes every thread read part of each row and skip the rest, a strided pattern the hardware
 * prefetchers follow badly. Measured on Zen 4, one thread doing its share of a 2-thread split of
 * GPT-2-124M's 12 layers: column halves 17.5 GB/s (QKV, c_fc) and 9.5 GB/s (the 768-wide
 * c_proj and MLP c_proj), K halves 23–30 GB/s; 13.0 ms against 6.5 ms per token.
 * K is cut into fixed blocks of SMALL_KB rows (independent of the thread count) and threads take
 * contiguous runs of blocks. A block accumulates in a buffer on the thread's stack (in L1) and is
 * then copied to its own slot of a shared scratch of partials (~150 KB for GPT-2's shapes: L2);
 * accumulating in place in the scratch measured ~25% slower. After one barrier each thread sums
 * the partials of its columns in block order and applies the epilogue. So every C element is the
 * same sum in the same order whatever the thread count, and the only extra traffic is the
 * partials (~1.6% of the bytes of B for GPT-2's shapes, from the caches). */
#ifndef SMALL_KB
#define SMALL_KB 64 /* rows of B per K block */
#endif
#define SMALL_KS_ACC 6144    /* most accumulators M·N (rounded to vectors) per block: 24 KB */
#define SMALL_KS_COLS 256    /* columns of C summed per reduction step */
/* Each line of B is prefetched into L1 with the non-temporal hint this many floats (512 bytes)
 * ahead of its use. Without it the stream of B evicts the partials from L1 once a row is wider
 * than ~1000 floats (the 12 KB of partials of a 3072-wide row were reloaded from L2 at every
 * row): one thread streamed 768×3072 at ~14 GB/s plain, ~26 GB/s with the hint (the read-only
 * sum of the same bytes: ~29 GB/s). 128 floats was the best of 64–256 on Zen 4. */
#define SMALL_KS_PF 128

/* part (Mc, Np) = A[:, k0 .. k1) · B[k0 .. k1, :]: one row of B at a time, a single stream. */
static inline __attribute__((always_inline)) void small_ks_block(const small_args *s, int Mc,
                                                                 int k0, int k1, int Np,
                                                                 float *part) {
    const gemm_args *g = s->g;
    const size_t ldb = (size_t)g->ldb;
    const int N = g->N, nfull = N / AV_LEN * AV_LEN;
    const av_mask tm = av_tail(N - nfull);
    for (int k = k0; k < k1; k++) {
        const float *b = g->B + (size_t)k * ldb;
        av_f a[SMALL_M];
        for (int m = 0; m < Mc; m++) a[m] = av_set1(s->A[(size_t)m * s->lda + k]);
        if (k == k0) { /* the block's first row sets the partials (no clearing pass) */
            for (int j = 0; j < nfull; j += AV_LEN) {
                _mm_prefetch((const char *)(b + j + SMALL_KS_PF), _MM_HINT_NTA);
                const av_f v = av_load(b + j);
                for (int m = 0; m < Mc; m++) av_store(part + (size_t)m * Np + j, av_mul(a[m], v));
            }
            if (nfull < N) {
                const av_f v = av_load_mask(b + nfull, tm); /* lanes past N: 0, never stored */
                for (int m = 0; m < Mc; m++)
                    av_store(part + (size_t)m * Np + nfull, av_mul(a[m], v));
            }
            continue;
        }
        for (int j = 0; j < nfull; j += AV_LEN) {
            _mm_prefetch((const char *)(b + j + SMALL_KS_PF), _MM_HINT_NTA);
            const av_f v = av_load(b + j);
            for (int m = 0; m < Mc; m++) {
                float *p = part + (size_t)m * Np + j;
                av_store(p, av_fmadd(a[m], v, av_load_aligned(p)));
            }
        }
        if (nfull < N) {
            const av_f v = av_load_mask(b + nfull, tm);
            for (int m = 0; m < Mc; m++) {
                float *p = part + (size_t)m * Np + nfull;
                av_store(p, av_fmadd(a[m], v, av_load_aligned(p)));
            }
        }
    }
}

/* Blocks [b0, b1) of K into their slots of parts (nblk, M, Np). */
static void small_ks_blocks(const small_args *s, int b0, int b1, int Np, float *parts) {
    const int K = s->g->K;
    const size_t nacc = (size_t)s->g->M * Np;
    float part[SMALL_KS_ACC] __attribute__((aligned(64))); /* (M, Np) of the current block */
    for (int blk = b0; blk < b1; blk++) {
        const int k0 = blk * SMALL_KB, k1 = ATTN_MIN(K, k0 + SMALL_KB);
#define KS_CASE(mc)                                                                              \
    case mc: small_ks_block(s, mc, k0, k1, Np, part); break;
        switch (s->g->M) {
            KS_CASE(1)
            KS_CASE(2)
            KS_CASE(3)
            KS_CASE(4)
            KS_CASE(5)
            KS_CASE(6)
            KS_CASE(7)
            KS_CASE(8)
        default: break;
        }
#undef KS_CASE
        memcpy(parts + (size_t)blk * nacc, part, nacc * sizeof(float));
    }
}

/* C[:, n0 .. n1) = epilogue(Σ_blk parts[blk]), the blocks summed in order. */
static void small_ks_reduce(const gemm_args *g, int nblk, int Np, const float *parts, int n0,
                            int n1) {
    float out[SMALL_KS_COLS] __attribute__((aligned(64)));
    const size_t bstride = (size_t)g->M * Np;
    for (int m = 0; m < g->M; m++)
        for (int j0 = n0; j0 < n1; j0 += SMALL_KS_COLS) {
            const int n = ATTN_MIN(SMALL_KS_COLS, n1 - j0);
            const float *p0 = parts + (size_t)m * Np + j0;
            for (int j = 0; j < n; j += AV_LEN) {
                av_f v = av_load_aligned(p0 + j);
                for (int blk = 1; blk < nblk; blk++)
                    v = av_add(v, av_load_aligned(p0 + (size_t)blk * bstride + j));
                av_store(out + j, v);
            }
            small_store(g, m, j0, n, out);
        }
}

/* The small-M product; false when out of memory for the copy of a transposed A or the K-split
 * partials (the caller then takes the general path). */
static bool gemm_small_m(const gemm_args *g) {
    small_args s = {g, g->A, g->lda};
    const int Np = (g->N + AV_LEN - 1) / AV_LEN * AV_LEN;
    const bool ksplit = !g->trans_b && g->K > 0 && (long)g->M * Np <= SMALL_KS_ACC;
    const int nblk = ksplit ? (g->K + SMALL_KB - 1) / SMALL_KB : 0;
    /* Scratch of the calling thread: the copy of A (trans_a), then the K-split partials. */
    const size_t na = g->trans_a ? ((size_t)g->M * (size_t)g->K + 15) & ~(size_t)15 : 0;
    const size_t np = ksplit ? (size_t)nblk * g->M * Np : 0;
    float *scratch = NULL;
    if (na + np > 0) {
        scratch = pack_cache(na + np);
        if (!scratch) return false;
    }
    if (g->trans_a) {
        /* A is (K, M): gather the M rows (M·K floats) contiguously once. */
        float *a = scratch;
        for (int k = 0; k < g->K; k++)
            for (int m = 0; m < g->M; m++) a[(size_t)m * g->K + k] = g->A[(size_t)k * g->lda + m];
        s.A = a;
        s.lda = g->K;
    }
    float *parts = scratch ? scratch + na : NULL; /* (nblk, M, Np) partial products */
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel() && (double)g->M * g->N * g->K >= (double)PARALLEL_MIN_MACS)
        nt = omp_get_max_threads();
#endif
    /* Column ranges on vector boundaries, at least a few vectors each; K blocks: at least one. */
    const int units = Np / AV_LEN;
    if (nt > units / 4) nt = units / 4;
    if (ksplit && nt > nblk) nt = nblk;
    if (nt < 1) nt = 1;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int t = 0, team = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        const int n0 = (int)ATTN_MIN((long)units * t / team * AV_LEN, g->N);
        const int n1 = (int)ATTN_MIN((long)units * (t + 1) / team * AV_LEN, g->N);
        if (ksplit) {
            small_ks_blocks(&s, (int)((long)nblk * t / team), (int)((long)nblk * (t + 1) / team),
                            Np, parts);
#ifdef _OPENMP
#pragma omp barrier
#endif
            if (n0 < n1) small_ks_reduce(g, nblk, Np, parts, n0, n1);
        } else if (n0 < n1) {
            small_rows(&s, n0, n1);
        }
    }
    return true;
}

static void gemm_rect_body(const gemm_args *g, int m0, int m1, int n0, int n1, float *buf,
                           const void *ctx) {
    (void)ctx;
    gemm_rect(g, m0, m1, n0, n1, buf, buf + pack_a_span(g));
}

/* C (M, N) = act(A (M, K) · Rᵀ + beta·C + bias) with R (N, K) from a row producer: the blocked
 * algorithm, its B panels filled from src's rows. false (nothing done) when out of memory. */
bool ATTN_FN(attn_gemm_rows)(int M, int N, int K,
                             const float *A, // (M, K), row stride lda
                             int lda, const attn_gemm_rowsrc *src, float beta,
                             float *C, // (M, N), row stride ldc
                             int ldc,
                             const float *bias, // (N) or NULL
                             attn_act act) {
    gemm_args g = {false, true, M, N, K, 1.0f, beta, A, NULL, C, bias, lda, 0, ldc, act, src};
    return run_team(&g, pack_a_span(&g) + pack_b_span(&g), gemm_rect_body, NULL);
}

void ATTN_FN(attn_gemm)(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float *A, // (M, K), or (K, M) if trans_a; row stride lda
                        int lda,
                        const float *B, // (K, N), or (N, K) if trans_b; row stride ldb
                        int ldb, float beta,
                        float *C, // (M, N), row stride ldc
                        int ldc,
                        const float *bias, // (N) or NULL
                        attn_act act) {
    gemm_args g = {trans_a, trans_b, M, N, K, alpha, beta, A, B, C, bias, lda, ldb, ldc, act, NULL};
    if (M >= 1 && M <= SMALL_M && N > 0 && gemm_small_m(&g)) return;

    /* Per-thread A and B buffers; out of memory for them, the reference loops need none. */
    if (!run_team(&g, pack_a_span(&g) + pack_b_span(&g), gemm_rect_body, NULL))
        attn_gemm_ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, act);
}

/* ---- pre-packed B (attn_gemm_pack_b / attn_gemm_packed, attn_kernels.h) --------------------- */

/* The packed layout of op(B) (K, N) for this ISA: K is cut into the blocks of kc_block(K) rows
 * that attn_gemm uses, N is padded to Np = a multiple of NR, and block pc (its first row) holds
 * its Np/NR column panels one after the other, each kc×NR as pack_b writes them:
 *   P[pc·Np + p·kc·NR + k·NR + c] = op(B)(pc + k, p·NR + c), 0 for columns past N.
 * Same panels and same K blocks as attn_gemm's packed path, so with the same microkernel every
 * element sums in the same order: the results equal attn_gemm's bit for bit (for M > SMALL_M,
 * where attn_gemm itself takes the packed path). */
static size_t pb_padded_n(int N) { return ((size_t)N + NR - 1) / NR * NR; }

size_t ATTN_FN(attn_gemm_pb_floats)(int K, int N) {
    size_t n = (size_t)K * pb_padded_n(N);
    return n ? n : 1;
}

void ATTN_FN(attn_gemm_pb_pack)(bool trans_b, int K, int N, const float *B, int ldb, float *P) {
    gemm_args g = {false, trans_b, 0, N, K, 1.0f, 0.0f, NULL, B, NULL, NULL, 0, ldb, 0,
                   ATTN_ACT_NONE, NULL};
    const size_t Np = pb_padded_n(N);
    const int kc_step = kc_block(K);
    for (int pc = 0; pc < K; pc += kc_step)
        pack_b(&g, pc, ATTN_MIN(kc_step, K - pc), 0, N, P + (size_t)pc * Np);
}

/* Rows [m0, m1) × columns [n0, n1) of C (n0, n1 on NR boundaries or N) from the packed B. */
static void pb_rect(const gemm_args *g, const float *P, int m0, int m1, int n0, int n1,
                    float *abuf) {
    epilogue e = {g->alpha, g->beta, true, false, g->act};
    const size_t Np = pb_padded_n(g->N);
    const int kc_step = kc_block(g->K);
    /* K == 0 still takes one pass: C = act(beta·C + bias). */
    for (int pc = 0;;) {
        const int kc = ATTN_MIN(kc_step, g->K - pc);
        e.first = pc == 0;
        e.last = pc + kc >= g->K;
        for (int ic = m0; ic < m1; ic += MC_MAX) {
            const int mc = ATTN_MIN(MC_MAX, m1 - ic);
            pack_a(g, ic, mc, pc, kc, abuf);
            for (int jr = n0; jr < n1; jr += NR) {
                const float *bp = P + (size_t)pc * Np + (size_t)jr * kc;
                const float *bias = g->bias ? g->bias + jr : NULL;
                /* The first row panel's kernel prefetches the next B panel of this rectangle
                 * (they are adjacent in P); the others re-touch their own. */
                const float *next = jr + NR < n1 ? bp + (size_t)kc * NR : bp;
                for (int ir = 0; ir < mc; ir += MR) {
                    const int mr = ATTN_MIN(MR, mc - ir);
                    microkernel(kc, abuf + (size_t)ir * kc, bp, ir == 0 ? next : bp,
                                g->C + (size_t)(ic + ir) * g->ldc + jr, g->ldc, mr,
                                ATTN_MIN(NR, n1 - jr), &e, bias);
                }
            }
        }
        pc += kc;
        if (pc >= g->K) break;
    }
}

static void pb_rect_body(const gemm_args *g, int m0, int m1, int n0, int n1, float *buf,
                         const void *P) {
    pb_rect(g, (const float *)P, m0, m1, n0, n1, buf);
}

/* Out of memory for the A panels: plain loops over the packed B (slow, never wrong). */
static void pb_scalar(const gemm_args *g, const float *P) {
    const size_t Np = pb_padded_n(g->N);
    const int kc_step = kc_block(g->K);
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < g->N; j++) {
            float s = 0.0f;
            for (int k = 0; k < g->K; k++) {
                const int pc = k / kc_step * kc_step, kc = ATTN_MIN(kc_step, g->K - pc);
                const float a = g->trans_a ? g->A[(size_t)k * g->lda + i]
                                           : g->A[(size_t)i * g->lda + k];
                s += a * P[(size_t)pc * Np + (size_t)(j / NR) * kc * NR + (size_t)(k - pc) * NR +
                           j % NR];
            }
            float *c = g->C + (size_t)i * g->ldc + j;
            float v = g->alpha * s;
            if (g->beta != 0.0f) v += g->beta * *c;
            if (g->bias) v += g->bias[j];
            av_f x = av_act(av_set1(v), g->act);
            float out[AV_LEN];
            av_store(out, x);
            *c = out[0];
        }
}

void ATTN_FN(attn_gemm_pb_run)(bool trans_a, int M, int N, int K, float alpha,
                               const float *A, // (M, K), or (K, M) if trans_a; row stride lda
                               int lda,
                               const float *P, // attn_gemm_pb_pack of op(B) (K, N)
                               float beta,
                               float *C, // (M, N), row stride ldc
                               int ldc,
                               const float *bias, // (N) or NULL
                               attn_act act) {
    gemm_args g = {trans_a, true, M, N, K, alpha, beta, A, NULL, C, bias, lda, 0, ldc, act, NULL};
    /* Only A is packed per call: one MC×KC block per thread. */
    if (!run_team(&g, pack_a_span(&g), pb_rect_body, P)) pb_scalar(&g, P);
}

#if ATTN_ISA == 512
/* ---- BF16: pre-packed B (attn_gemm_pack_b_precision) and the general product
 *      (attn_gemm_precision, both operands packed per call); attn_kernels.h ------------------- */

static inline __mmask16 mask16(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* vpermw indices taking 32 bfloat16 x0[0..15] | x1[0..15] to the pairs (x0[c], x1[c]). */
static inline __m512i bf16_interleave(void) {
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                            22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

/* Two rows of 16 floats (lanes outside m zero; r1 NULL: zeros) as 16 bfloat16 pairs
 * (r0[c], r1[c]): the packing of a k pair when the 16 values of a k lie side by side. */
BF16_FN static inline __m512i bf16_pairs_of_rows(const float *r0, const float *r1, __mmask16 m,
                                                 __m512i inter) {
    __m512 x0 = _mm512_maskz_loadu_ps(m, r0);
    __m512 x1 = r1 ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps();
    return _mm512_permutexvar_epi16(inter, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));
}

/* Up to 16 rows of 32 floats (row i at src + i·ld; rows from `rows` on zero; floats from n on
 * zero) as bfloat16 pairs, transposed: on return lane i of r[q] is pair q of row i. The packing
 * when each row's k pairs lie side by side. */
BF16_FN static inline void bf16_pairs_transposed(const float *src, size_t ld, int rows, int n,
                                                 av_f r[16]) {
    for (int i = 0; i < 16; i++) {
        if (i >= rows) {
            r[i] = _mm512_setzero_ps();
            continue;
        }
        __m512 lo = _mm512_maskz_loadu_ps(mask16(n), src + (size_t)i * ld);
        __m512 hi = _mm512_maskz_loadu_ps(mask16(n - 16), src + (size_t)i * ld + 16);
        r[i] = _mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    transpose_regs(r);
}

/* Rows [i0, i0+mc) × columns [k0, k0+kc) of op(A) rounded to bfloat16 (VCVTNE2PS2BF16: round to
 * nearest even) into MR-tall panels of k pairs: dst[p·kp·MR + q·MR + r] holds
 * op(A)(i0 + p·MR + r, k0 + 2q) in its low half and column k0 + 2q + 1 (0 past kc) in its high
 * half; rows past mc are zero or not written (their kernels never read them). */
BF16_FN static void pack_a_bf16(const gemm_args *g, int i0, int mc, int k0, int kc,
                                uint32_t *dst) {
    const int kp = (kc + 1) / 2;
    const size_t lda = (size_t)g->lda;
    if (g->trans_a) {
        /* A is (K, M): a panel's rows are adjacent in each row of A; rows k and k + 1 of A side
         * by side, then their elements interleaved into pairs. */
        const __m512i inter = bf16_interleave();
        for (int p = 0; p * MR < mc; p++) {
            uint32_t *d = dst + (size_t)p * kp * MR;
            const __mmask16 m = mask16(ATTN_MIN(MR, mc - p * MR));
            const float *src = g->A + (size_t)k0 * lda + i0 + p * MR;
            for (int q = 0; q < kp; q++) {
                const float *r0 = src + (size_t)(2 * q) * lda;
                _mm512_mask_storeu_epi32(
                    d + (size_t)q * MR, m,
                    bf16_pairs_of_rows(r0, 2 * q + 1 < kc ? r0 + lda : NULL, m, inter));
            }
        }
        return;
    }
    /* A is (M, K): 32 columns (16 pairs) of each of the panel's rows converted in one register,
     * the 16 registers (rows past mr zero) transposed so that register q holds pair q of every
     * row, stored MR lanes at a time. */
    for (int p = 0; p * MR < mc; p++) {
        uint32_t *d = dst + (size_t)p * kp * MR;
        const int mr = ATTN_MIN(MR, mc - p * MR);
        const float *src = g->A + (size_t)(i0 + p * MR) * lda + k0;
        for (int k = 0; k < kc; k += 32) {
            const int n = kc - k;
            av_f r[16];
            bf16_pairs_transposed(src + k, lda, mr, n, r);
            const int np = ATTN_MIN((n + 1) / 2, 16);
            for (int q = 0; q < np; q++)
                _mm512_mask_storeu_ps((float *)(void *)(d + (size_t)(k / 2 + q) * MR),
                                      mask16(MR), r[q]);
        }
    }
}

/* Rows [k0, k0+kc) × columns [j0, j0+nc) of op(B) rounded to bfloat16 into NR-wide panels of k
 * pairs, the layout of one K block of the pre-packed BF16 matrix:
 *   dst[p·kp·64 + q·64 + c·2 + h] = bf16(op(B)(k0 + 2q + h, j0 + p·NR + c)), 0 past kc or nc. */
BF16_FN static void pack_b_bf16(const gemm_args *g, int k0, int kc, int j0, int nc,
                                uint16_t *dst) {
    const int kp = (kc + 1) / 2;
    const size_t ldb = (size_t)g->ldb;
    if (!g->trans_b) {
        /* B is (K, N): rows k and k + 1 side by side, then their elements interleaved. */
        const __m512i inter = bf16_interleave();
        for (int p = 0; p * NR < nc; p++) {
            uint16_t *d = dst + (size_t)p * kp * 64;
            const int nr = ATTN_MIN(NR, nc - p * NR);
            for (int q = 0; q < kp; q++) {
                const float *r0 = g->B + (size_t)(k0 + 2 * q) * ldb + j0 + p * NR;
                const bool odd = 2 * q + 1 < kc;
                for (int h = 0; h < 2; h++)
                    _mm512_storeu_si512(d + (size_t)q * 64 + 32 * h,
                                        bf16_pairs_of_rows(r0 + 16 * h,
                                                           odd ? r0 + ldb + 16 * h : NULL,
                                                           mask16(nr - 16 * h), inter));
            }
        }
        return;
    }
    /* B is (N, K): a column of op(B) is a row of B, its pairs adjacent. 32 floats (16 pairs) of
     * each of 16 columns converted one register each, then transposed so that register q holds
     * pair q of those columns: one half of the panel's row q. */
    for (int p = 0; p * NR < nc; p++) {
        uint32_t *d = (uint32_t *)(void *)(dst + (size_t)p * kp * 64);
        const int nr = ATTN_MIN(NR, nc - p * NR);
        for (int h = 0; h < 2; h++) {
            const int cols = ATTN_MIN(16, nr - 16 * h); /* may be <= 0: a padding half */
            const float *src = g->B + (size_t)(j0 + p * NR + 16 * h) * ldb + k0;
            for (int k = 0; k < kc; k += 32) {
                const int n = kc - k;
                av_f r[16];
                bf16_pairs_transposed(src + k, ldb, cols, n, r);
                const int np = ATTN_MIN((n + 1) / 2, 16);
                for (int q = 0; q < np; q++)
                    _mm512_storeu_ps((float *)(void *)(d + (size_t)(k / 2 + q) * 32 + 16 * h),
                                     r[q]);
            }
        }
    }
}

/* Rows [m0, m1) × columns [n0, n1) of C (on NR boundaries or N) in BF16, the blocked algorithm
 * of gemm_rect: with op(B) pre-packed in P (attn_gemm_pack_b_precision's layout), or with P NULL
 * each KC×NC block of op(B) packed here into bbuf (the same layout, one block). */
BF16_FN static void bf16_rect(const gemm_args *g, const uint16_t *P, int m0, int m1, int n0,
                              int n1, uint32_t *abuf, uint16_t *bbuf) {
    epilogue e = {g->alpha, g->beta, true, false, g->act};
    const size_t Np = pb_padded_n(g->N);
    const int kb = attn_bf16_kb(g->K);
    for (int jc = n0; jc < n1; jc += NC_MAX) {
        const int nc = ATTN_MIN(NC_MAX, n1 - jc);
        /* K == 0 still takes one pass: C = act(beta·C + bias). */
        for (int pc = 0, blk = 0;; blk++) {
            const int kc = ATTN_MIN(kb, g->K - pc), kp = (kc + 1) / 2;
            e.first = pc == 0;
            e.last = pc + kc >= g->K;
            const uint16_t *panels = bbuf;
            if (P)
                panels = P + (size_t)blk * (((size_t)kb + 1) / 2) * Np * 2 +
                         (size_t)(jc / NR) * kp * 64;
            else
                pack_b_bf16(g, pc, kc, jc, nc, bbuf);
            for (int ic = m0; ic < m1; ic += MC_MAX) {
                const int mc = ATTN_MIN(MC_MAX, m1 - ic);
                pack_a_bf16(g, ic, mc, pc, kc, abuf);
                for (int jr = 0; jr < nc; jr += NR) {
                    const uint16_t *bp = panels + (size_t)(jr / NR) * kp * 64;
                    const float *bias = g->bias ? g->bias + jc + jr : NULL;
                    /* Pre-packed: the first row panel's kernel prefetches the next B panel
                     * (adjacent in P); the others re-touch their own. */
                    const uint16_t *next = P && jr + NR < nc ? bp + (size_t)kp * 64 : bp;
                    for (int ir = 0; ir < mc; ir += MR)
                        mkb_table[ATTN_MIN(MR, mc - ir)](
                            kp, abuf + (size_t)ir * kp, bp, ir == 0 ? next : bp,
                            g->C + (size_t)(ic + ir) * g->ldc + jc + jr, g->ldc,
                            ATTN_MIN(MR, mc - ir), ATTN_MIN(NR, nc - jr), &e, bias);
                }
            }
            pc += kc;
            if (pc >= g->K) break;
        }
    }
}

/* run_team bodies: ctx is the pre-packed B, or NULL (both operands packed per call). */
static void bf16_rect_body(const gemm_args *g, int m0, int m1, int n0, int n1, float *buf,
                           const void *P) {
    bf16_rect(g, (const uint16_t *)P, m0, m1, n0, n1, (uint32_t *)(void *)buf,
              P ? NULL : (uint16_t *)(void *)(buf + pack_a_span(g)));
}

void attn_gemm_bf16_run_avx512(bool trans_a, int M, int N, int K, float alpha,
                               const float *A, // (M, K), or (K, M) if trans_a; row stride lda
                               int lda,
                               const uint16_t *P, // attn_gemm_bf16_pack of op(B) (K, N)
                               float beta,
                               float *C, // (M, N), row stride ldc
                               int ldc,
                               const float *bias, // (N) or NULL
                               attn_act act) {
    gemm_args g = {trans_a, true, M, N, K, alpha, beta, A, NULL, C, bias, lda, 0, ldc, act, NULL};
    /* Only A is packed per call (the F32 span holds its BF16 pairs with room to spare). */
    if (!run_team(&g, pack_a_span(&g), bf16_rect_body, P))
        attn_gemm_bf16_run_ref(trans_a, M, N, K, alpha, A, lda, P, beta, C, ldc, bias, act);
}

void attn_gemm_bf16_avx512(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float *A, // (M, K), or (K, M) if trans_a; row stride lda
                           int lda,
                           const float *B, // (K, N), or (N, K) if trans_b; row stride ldb
                           int ldb, float beta,
                           float *C, // (M, N), row stride ldc
                           int ldc,
                           const float *bias, // (N) or NULL
                           attn_act act) {
    gemm_args g = {trans_a, trans_b, M, N, K, alpha, beta, A, B, C, bias, lda, ldb, ldc, act, NULL};
    /* The F32 pack spans hold the BF16 panels (pairs of k rows) with room to spare. */
    if (!run_team(&g, pack_a_span(&g) + pack_b_span(&g), bf16_rect_body, NULL))
        attn_gemm_bf16_ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias,
                           act);
}
#endif

/* attn_quant.h — quantized weight types (GGUF's block formats) and the matrix products on them.
 *
 * A quantized matrix W (N, K) is stored the way a GGUF file stores it: row by row, each row K/B
 * blocks of B elements (B = attn_quant_block_elems(type)), each block attn_quant_block_bytes(type)
 * bytes, rows contiguous (row n starts at byte n · attn_quant_row_bytes). The products read such
 * weights in place (a memory-mapped file is fine: they are never written, never copied whole).
 *
 *   size_t rb;
 *   attn_quant_row_bytes(ATTN_QTYPE_Q4_1, K, &rb);           // bytes of one row of W
 *   void *w = attn_alloc(N * rb);
 *   attn_quant_quantize(ATTN_QTYPE_Q4_1, (int64_t)N * K, w_f32, w);  // or point w into a GGUF file
 *   attn_quant_gemm(M, N, K, x, K, ATTN_QTYPE_Q4_1, w, 0.0f, y, N, bias, ATTN_ACT_NONE,
 *                   ATTN_QUANT_ACT_F32);                     // y (M, N) = x (M, K) · Wᵀ + bias
 *
 * ---- the block formats (little-endian; exactly ggml-common.h's structs, no padding) ----------
 * "half" is an IEEE binary16 (attn_quant_f16_to_f32), q the stored unsigned code of an element.
 * Element i of a block is its i-th value along K.
 *
 *   F32   (1 element, 4 bytes)  float32.
 *   F16   (1 element, 2 bytes)  binary16.
 *   BF16  (1 element, 2 bytes)  the high 16 bits of a float32.
 *   Q8_0  (32 elements, 34 bytes)
 *           half d; int8 qs[32]                           x_i = qs[i] · d
 *   Q4_0  (32, 18)
 *           half d; uint8 qs[16]                          q_i = qs[i] & 15, q_{i+16} = qs[i] >> 4
 *                                                         x_i = d · (q_i − 8)
 *   Q4_1  (32, 20)
 *           half d; half m; uint8 qs[16]                  q as Q4_0;  x_i = d · q_i + m
 *   Q5_0  (32, 22)
 *           half d; uint8 qh[4]; uint8 qs[16]             h = qh read as a little-endian uint32;
 *                                                         q_i = (low nibble as Q4_0) | (bit i of
 *                                                         h) << 4;  x_i = d · (q_i − 16)
 *   Q5_1  (32, 24)
 *           half d; half m; uint8 qh[4]; uint8 qs[16]     q as Q5_0;  x_i = d · q_i + m
 *   Q4_K  (256 elements, 144 bytes): 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min
 *           half d; half dmin; uint8 scales[12]; uint8 qs[128]
 *           scale and min of sub-block j: for j < 4  sc_j = scales[j] & 63,
 *                                                    m_j  = scales[j + 4] & 63;
 *                                         for j >= 4 sc_j = (scales[j + 4] & 15) | (scales[j − 4] >> 6) << 4,
 *                                                    m_j  = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4
 *           elements 64c .. 64c + 31 (sub-block 2c) are the low nibbles of qs[32c .. 32c + 31],
 *           elements 64c + 32 .. 64c + 63 (sub-block 2c + 1) their high nibbles (c = 0..3);
 *           x = (d · sc_j) · q − (dmin · m_j)
 *   Q5_K  (256, 176)
 *           half d; half dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]
 *           as Q4_K, plus a fifth bit: element 64c + l (l < 32) takes bit 2c of qh[l], element
 *           64c + 32 + l bit 2c + 1 of qh[l], as bit 4 of q (0..31)
 *   Q6_K  (256, 210): 16 sub-blocks of 16 with signed 8-bit scales
 *           uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d
 *           for each half h = 0, 1 (elements 128h .. 128h + 127) and l = 0..31, with
 *           L = ql + 64h, H = qh + 32h, e = 128h + l:
 *             q_e      = (L[l] & 15)      | ((H[l] >> 0) & 3) << 4
 *             q_{e+32} = (L[l + 32] & 15) | ((H[l] >> 2) & 3) << 4
 *             q_{e+64} = (L[l] >> 4)      | ((H[l] >> 4) & 3) << 4
 *             q_{e+96} = (L[l + 32] >> 4) | ((H[l] >> 6) & 3) << 4
 *           x_i = (d · scales[i / 16]) · (q_i − 32)
 * Dequantization performs exactly these float32 operations in this order (a product of two
 * float32s is one rounding, "d · sc" is computed first), which is what the gguf Python package
 * (gguf.quants, 0.17.1) does: the results are bit for bit its results, for every byte pattern,
 * NaN and infinite scales included (tests/test_quant.c).
 *
 * ---- quantization ----------------------------------------------------------------------------
 * attn_quant_quantize writes what gguf.quants.quantize writes, byte for byte, for the types that
 * package implements: F16 (NumPy's float32 -> float16 rounding: to nearest even, overflow to inf),
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (its arithmetic reproduced exactly, e.g. Q4_0's and Q5_0's
 * float64 step). For Q4_K, Q5_K and Q6_K, which that package only dequantizes, it is ggml's
 * reference quantizer (quantize_row_q4_K_ref and siblings, what llama-quantize writes without an
 * importance matrix: a weighted search over scales and mins per sub-block), evaluated in strict
 * IEEE float32 (every product and sum rounded on its own, no fused multiply-add). A llama.cpp
 * build that contracts a·b + c into FMAs may differ from it in the last bit of a scale, and so in
 * rare codes. Input with NaN or infinities gives well-defined blocks (no undefined conversions),
 * not necessarily the Python package's. Scales are rounded to half precision as the formats
 * require.
 *
 * ---- products --------------------------------------------------------------------------------
 * attn_quant_gemm: y (M, N) = act(x (M, K) · Wᵀ + bias + beta · y), W (N, K) quantized as above.
 * Paths (the backend of attn_kernels.h, chosen at run time like every kernel):
 *   ref       each row of W dequantized (as attn_quant_dequantize), then float dot products with
 *             a double accumulator in index order; single thread. The yardstick.
 *   avx2/512  M <= 8 (token-by-token decoding): W streamed once, OpenMP threads over N, every
 *             block decoded in registers and used for all M rows (F16/BF16/F32 weights: float
 *             products). Per row of y a fixed summation order, so any thread count gives the same
 *             bits. With ATTN_QUANT_ACT_Q8, integer dot products against activations quantized
 *             per 32 elements (below); otherwise float products.
 *             M > 8 (prompt processing): a blocked GEMM: KC×NC panels of W dequantized (bit for
 *             bit attn_quant_dequantize's values) into the packed float32 layout of attn_gemm's
 *             microkernels, which then run unchanged (bias and activation in their epilogue).
 * Accuracy against the exact product with the dequantized weights (measured in
 * tests/test_quant.c, relative to Σ_k |x_k · w_k| of each output element):
 *   ATTN_QUANT_ACT_F32: float32 sums, ~1e-7 per element (attn_gemm's accuracy);
 *   ATTN_QUANT_ACT_Q8 (M <= 8 on the SIMD backends only): each block b of 32 activations is
 *     rounded to int8 codes with step d_b = max_b|x| / 127 (an error of at most d_b / 2 per
 *     element), then exact integer dot products, then float32 scaling and sums — the arithmetic
 *     of llama.cpp's Q8_0/Q8_1 activations. Per element |error| <= Σ_b (d_b / 2) · Σ_{k∈b} |w_k|
 *     (plus float32 rounding), checked element by element. Measured (AVX2, every block type,
 *     K = 416 or 768): uniform activations worst 8.7e-4, mean 1.8e-4; activations with one ×20
 *     outlier per 32 worst 6.1e-3, mean 1.3e-3. Through a whole block (gated FFN, attention,
 *     M = 1) ~1e-2 of max|y|.
 *     On the ref backend, and for M > 8, and for F32/F16/BF16 weights, it is the same as F32.
 *
 * ---- packed weights (attn_quant_pack): the x8 layout ------------------------------------------
 * Q8_0, Q4_0 and Q4_1 matrices can be repacked once (at load) into a layout that decodes eight
 * rows of W at a time: the integer products then give eight outputs per vector, with the eight
 * rows' scales converted by one instruction and no horizontal sums (the row layout needs one
 * per output and its scalar scale work per block). The same bytes per row as the GGUF layout:
 *   rows 0 .. N8 − 1, N8 = N − N mod 8, in panels of 8 rows; panel p, group g (elements 32g ..
 *   32g + 31) is S bytes at (p · K/32 + g) · S:
 *     half d[8]                   row 8p + r's block scale (the block's d)
 *     half m[8]                   Q4_1 only: the blocks' m
 *     codes                       Q8_0: 8 chunks c of 32 bytes; Q4_0 / Q4_1: 4 chunks. Byte
 *                                 4r + e of chunk c is byte 4c + e of row 8p + r's qs: for Q8_0
 *                                 element 4c + e, for Q4 the nibbles of elements 4c + e (low) and
 *                                 16 + 4c + e (high)
 *     S = 272 (Q8_0), 144 (Q4_0), 160 (Q4_1): 8 blocks' bytes;
 *   then rows N8 .. N − 1 in the row layout above.
 * attn_quant_gemm_packed computes what attn_quant_gemm computes on the original rows: for
 * ATTN_QUANT_ACT_Q8 with M <= 8 the same integer products and scales per block (the sums over
 * blocks in another order: float32 rounding apart, the same result), otherwise the same blocked
 * GEMM on bit-identical dequantized values.
 */
#ifndef ATTN_QUANT_H
#define ATTN_QUANT_H

#include "attn_core.h"
#include "attn_kernels.h"

/* The most rows a product quantizes its activations for with ATTN_QUANT_ACT_Q8 (above: M <= 8);
 * a product of more rows keeps float32 activations, except in the batched forms
 * (attn_quant_gemm_batch / _packed_batch: chunks of this many rows, each quantized). */
#define ATTN_QUANT_Q8_MAX_ROWS 8

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The weight types; each value is ggml's type id (GGUF's tensor type field), so a GGUF reader
 * maps a tensor's type by value after attn_quant_type_known. */
typedef enum {
    ATTN_QTYPE_F32 = 0,
    ATTN_QTYPE_F16 = 1,
    ATTN_QTYPE_Q4_0 = 2,
    ATTN_QTYPE_Q4_1 = 3,
    ATTN_QTYPE_Q5_0 = 6,
    ATTN_QTYPE_Q5_1 = 7,
    ATTN_QTYPE_Q8_0 = 8,
    ATTN_QTYPE_Q4_K = 12,
    ATTN_QTYPE_Q5_K = 13,
    ATTN_QTYPE_Q6_K = 14,
    ATTN_QTYPE_BF16 = 30,
    /* attn's own, not a GGUF type (attn_quant_type_known is false for it, it has no row layout):
     * CTranslate2's int8, a packed matrix only (attn_quant_pack_i8, below) */
    ATTN_QTYPE_I8 = 1024
} attn_qtype;

/* How attn_quant_gemm treats the activations x on its M <= 8 SIMD path (see above). */
typedef enum {
    ATTN_QUANT_ACT_F32 = 0, /* float32 activations: the product with the dequantized weights */
    ATTN_QUANT_ACT_Q8,      /* activations rounded to int8 per 32: integer dot products, faster */
    ATTN_QUANT_ACT_Q8_ALL   /* Q8, and for M > 8 too where there is a kernel for it: packed Q8_0
                               weights (N a multiple of 8) on AVX512-VNNI CPUs, each
                               output then bit for bit the M <= 8 path's on its row; otherwise Q8 */
} attn_quant_act;

/* Whether id (a GGUF tensor type) is one of the types above. */
bool attn_quant_type_known(uint32_t id);
/* ggml's names: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K",
 * "q6_K"; "?" for an unknown value. */
const char *attn_quant_type_name(attn_qtype t);
/* The names above, case-insensitive; ATTN_STATUS_INVALID_ARGUMENT naming the known ones. */
attn_status attn_quant_type_parse(const char *name, attn_qtype *out);
/* Elements per block (1, 32 or 256) and bytes per block; 0 for an unknown type. */
int attn_quant_block_elems(attn_qtype t);
size_t attn_quant_block_bytes(attn_qtype t);
/* Bytes of a row of n elements. ATTN_STATUS_INVALID_ARGUMENT when the type is unknown, n < 0 or
 * n is not a multiple of the block ("q4_K: a row of 100 elements is not a multiple of the block
 * of 256"); ATTN_STATUS_TOO_LARGE when the size overflows. */
attn_status attn_quant_row_bytes(attn_qtype t, int64_t n, size_t *bytes);

/* dst (n) = the values of the n elements (n/B blocks) at src, as defined above. n must be a
 * multiple of the block. Any bytes are valid blocks. */
attn_status attn_quant_dequantize(attn_qtype t, int64_t n, const void *src, float *dst);
/* dst (n/B blocks) = src (n) quantized, as described above. */
attn_status attn_quant_quantize(attn_qtype t, int64_t n, const float *src, void *dst);

/* binary16 <-> float32. f16_to_f32 is exact (NaN payloads kept); f32_to_f16 rounds to nearest
 * even, overflows to ±inf and keeps NaN a NaN (NumPy's float16 cast). */
float attn_quant_f16_to_f32(uint16_t h);
uint16_t attn_quant_f32_to_f16(float f);
/* A row at a time: dst (n) = attn_quant_f32_to_f16 of each of src (n), back (n) = those halves as
 * floats (attn_quant_f16_to_f32: the values rounded to binary16); either output may be NULL, and
 * back may be src (in place). The vector backends convert eight at a time with F16C (VCVTPS2PH
 * rounds to nearest even; VCVTPH2PS is exact) and a group holding a NaN one at a time (F16C would
 * quiet a signaling NaN's payload): the same bits on every backend, with or without flushed
 * denormals (tests/test_quant.c). */
void attn_quant_f32_to_f16_n(size_t n, const float *src, uint16_t *dst, float *back);

/* y (M, N; row stride ldy) = act(x (M, K; row stride ldx) · Wᵀ + bias + beta · y), W (N, K) of
 * type t at w (N rows of attn_quant_row_bytes(t, K) bytes). bias (N) or NULL; beta == 0: y is not
 * read (it may hold NaN). K must be a multiple of t's block; M, N, K may be 0. qact: see above.
 * w need not be aligned. */
attn_status attn_quant_gemm(int M, int N, int K, const float *x, int ldx, attn_qtype t,
                            const void *w, float beta, float *y, int ldy, const float *bias,
                            attn_act act, attn_quant_act qact);

/* W (N, K) of type t in the x8 layout (above), or in the i8 layout (ATTN_QTYPE_I8, below):
 * owned data of `bytes` bytes. */
typedef struct {
    attn_qtype type; /* ATTN_QTYPE_Q8_0, _Q4_0, _Q4_1 or _I8 */
    int N, K;        /* W's shape */
    size_t bytes;
    void *data;      /* panels (N8/8, K/32, S bytes), then N − N8 rows of the row layout */
    int32_t *nsum;   /* Q8_0 after attn_quant_pack_sums: (N8/8, K/32, 8) −128 · Σ of each row's 32
                        codes per group (the many-row VNNI product's correction); I8: (N16)
                        −128 · Σ of each row's K codes (0 past N); else NULL */
    float *scale;    /* I8: (N16) each row's scale d_n (0 past N); else NULL */
} attn_quant_packed;

/* Whether attn_quant_pack takes type t. */
bool attn_quant_pack_supported(attn_qtype t);
/* out = W (N, K) of type t (rows at w, the row layout) in the x8 layout. INVALID_ARGUMENT for
 * another type or a K that is not a multiple of 32; TOO_LARGE / OUT_OF_MEMORY before writing
 * out. Free with attn_quant_packed_free. */
attn_status attn_quant_pack(attn_qtype t, int N, int K, const void *w, attn_quant_packed *out);
/* For a packed Q8_0 W that many-row int8 products (ATTN_QUANT_ACT_Q8_ALL, M > 8) will use again
 * and again (a translator's beam steps): compute P->nsum once, which those products otherwise
 * compute per call (N·K/8 bytes more; the results are the same bits). Other types: a no-op. */
attn_status attn_quant_pack_sums(attn_quant_packed *P);
void attn_quant_packed_free(attn_quant_packed *p);
/* Row n (0 <= n < N) of a packed W back in the row layout: row (attn_quant_row_bytes bytes). */
attn_status attn_quant_packed_row(const attn_quant_packed *p, int n, void *row);
/* out (K) = row n of a packed W dequantized (attn_quant_dequantize's values): an embedding
 * lookup in a packed table. */
attn_status attn_quant_packed_dequant_row(const attn_quant_packed *p, int n, float *out);
/* attn_quant_gemm with W = P's matrix (N = P->N, K = P->K). */
attn_status attn_quant_gemm_packed(int M, const float *x, int ldx, const attn_quant_packed *P,
                                   float beta, float *y, int ldy, const float *bias,
                                   attn_act act, attn_quant_act qact);

/* ---- CTranslate2's int8: ATTN_QTYPE_I8 ---------------------------------------------------------
 * W (N, K) as int8 codes with one float32 scale per row (output channel), the scheme of
 * CTranslate2's int8 (its oneDNN / MKL kernels):
 *   d_n = max_k |w_nk| / 127,  q_nk = round(w_nk · (1 / d_n)) (to nearest even, |q| <= 127;
 *   q = 0 when d_n = 0),  w_nk ≈ d_n · q_nk.
 * The products quantize each row of x the same way (e_m = max_k |x_mk| / 127, p_mk the codes: one
 * scale per row, whatever attn_quant_act says), sum the codes' products over the whole of K in
 * int32 (exact: no per-block float work) and scale once:
 *   y_mn = act((float)(Σ_k p_mk · q_nk) · (e_m · d_n) + beta · y_mn + bias_n)
 * (beta · y + v fused as one fma). Every backend gives the same int32 sums and so the same bits
 * for act NONE and RELU (ref: plain loops; AVX512-VNNI: VPDPBUSD on 16 rows x 4 k per
 * instruction, the activations stored + 128 as unsigned bytes and the rows' −128 · Σ q
 * correction precomputed); GELU and SiLU use each backend's own function.
 * The i8 layout: data (N16/16, K/4, 16, 4) int8: panel p holds rows 16p .. 16p + 15 (zeros past N),
 * for each 4 consecutive k the 16 rows' 4 codes (64 bytes: one VPDPBUSD operand); scale and nsum
 * as in attn_quant_packed; N16 = N rounded up to 16; bytes = N16 · K.
 * out = w (N, K float32, row-major, finite) quantized so. INVALID_ARGUMENT unless N >= 0 and K is a
 * multiple of 4 from 4 to 65536 (int32 sums cannot overflow); TOO_LARGE / OUT_OF_MEMORY before
 * writing out. attn_quant_gemm_packed(_batch) and attn_quant_packed_dequant_row take the result;
 * attn_quant_packed_row refuses it (no row layout). Free with attn_quant_packed_free. */
attn_status attn_quant_pack_i8(int N, int K, const float *w, attn_quant_packed *out);

/* A batched decoding step (several sequences, one row each: attn_gpt_decode_ragged): the same
 * products with the M <= 8 decoding path for any M, the rows in chunks of 8 per strip of W (of
 * 16 for a packed W with Q8 activations on AVX512-VNNI; the strip stays in L1 between the
 * chunks, so W is streamed from memory once). The result is exactly attn_quant_gemm /
 * attn_quant_gemm_packed over each chunk of 8 rows (the last chunk M mod 8), in qact (Q8: int8
 * activations for every row): a row's result does not depend on its chunk. Faster than the dequantized-panel
 * GEMM up to a few dozen rows (attn_nn.h's few_rows says where it is used). */
attn_status attn_quant_gemm_batch(int M, int N, int K, const float *x, int ldx, attn_qtype t,
                                  const void *w, float beta, float *y, int ldy, const float *bias,
                                  attn_act act, attn_quant_act qact);
attn_status attn_quant_gemm_packed_batch(int M, const float *x, int ldx,
                                         const attn_quant_packed *P, float beta, float *y,
                                         int ldy, const float *bias, attn_act act,
                                         attn_quant_act qact);

/* out (n_ids, C) = rows ids (n_ids) of table (V, C) of type t, dequantized: an embedding lookup
 * on quantized weights. An id outside [0, V) is ATTN_STATUS_INVALID_ARGUMENT. */
attn_status attn_quant_embedding_forward(int n_ids, int V, int C, const int32_t *ids,
                                         attn_qtype t, const void *table, float *out);

#ifdef __cplusplus
}
#endif
#endif

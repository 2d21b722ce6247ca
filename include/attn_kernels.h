/* attn_kernels.h — the compute kernels of libattn: GEMM, softmax, layer norm, activations,
 * embedding, cross-entropy and fused attention, forward and backward, fp32, row-major.
 *
 * Each kernel has a plain reference path (ATTN_BACKEND_REF: simple loops, easy to audit) and an
 * optimized CPU path (AVX-512 or AVX2 + FMA, OpenMP threads), picked at run time from the CPU's
 * features. The environment variable ATTN_BACKEND=ref|avx2|avx512|auto, read on first use, or
 * attn_set_backend() selects one; the tests compare the paths with each other and with PyTorch.
 *
 * Shapes are given in comments as (rows, cols) of a row-major matrix. Every function validates its
 * arguments and returns ATTN_STATUS_INVALID_ARGUMENT (with attn_last_error()) on bad ones.
 *
 *   attn_gemm(false, true, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N, bias, ATTN_ACT_GELU_TANH);
 *   // y (M,N) = gelu(x (M,K) · w (N,K)^T + bias (N))   — nn.Linear followed by GELU
 */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include "attn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backend selection ------------------------------------------------------------------- */

typedef enum {
    ATTN_BACKEND_AUTO = 0, /* the best the CPU supports */
    ATTN_BACKEND_REF,      /* plain C reference loops, single thread */
    ATTN_BACKEND_AVX2,     /* AVX2 + FMA, OpenMP */
    ATTN_BACKEND_AVX512    /* AVX-512F/BW/DQ/VL, OpenMP */
} attn_backend;

/* Select a backend; ATTN_STATUS_UNSUPPORTED if this CPU lacks it. AUTO picks the best. */
attn_status attn_set_backend(attn_backend b);
/* The backend in use (never AUTO). Reads ATTN_BACKEND on first call. */
attn_backend attn_get_backend(void);
/* Whether this CPU can run b. */
bool attn_backend_available(attn_backend b);
/* "auto", "ref", "avx2", "avx512". */
const char *attn_backend_name(attn_backend b);
/* Parse a name as above; ATTN_STATUS_INVALID_ARGUMENT if unknown. */
attn_status attn_backend_parse(const char *name, attn_backend *out);

/* ---- GEMM -------------------------------------------------------------------------------- */

/* The multiply-adds done by this process's matrix products so far: M·N·K for each call of
 * attn_gemm, attn_gemm_precision, attn_gemm_packed and attn_quant_gemm* that gets past its
 * argument checks (attention's score and value products, which are not made through these
 * functions, are not counted). A statistic for benchmarks (`attn translate --stats`): it tells
 * how far a run is from the matrix products' arithmetic bound. Thread-safe. */
uint64_t attn_kernels_multiply_adds(void);

typedef enum {
    ATTN_ACT_NONE = 0,
    ATTN_ACT_RELU,
    ATTN_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) — GPT-2 */
    ATTN_ACT_GELU_ERF,  /* 0.5 x (1 + erf(x / sqrt(2)))                     — BERT  */
    ATTN_ACT_SILU       /* x · sigmoid(x) = x / (1 + exp(−x)) — Llama's SwiGLU gate (nn.SiLU) */
} attn_act;

/* C = act(alpha · op(A) · op(B) + beta · C + bias)
 *   op(A) is (M, K): A is stored (M, K) with row stride lda if !trans_a, else (K, M).
 *   op(B) is (K, N): B is stored (K, N) with row stride ldb if !trans_b, else (N, K).
 *   C (M, N) with row stride ldc; bias (N) or NULL, added to every row.
 * beta == 0 means C is not read (it may hold NaN). M, N or K may be 0. */
attn_status attn_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc, const float *bias, attn_act act);

/* Pre-packed B: a matrix multiplied by many GEMMs (a weight at inference) packed ONCE into the
 * current backend's panel layout, so that attn_gemm_packed skips the per-call packing of B (for
 * a few dozen rows of A that packing costs as much as the product). The result of
 * attn_gemm_packed equals attn_gemm's with the same arguments bit for bit whenever attn_gemm
 * takes its packed path (M > 8 rows on the SIMD backends; always on ATTN_BACKEND_REF); for
 * M <= 8 attn_gemm streams B instead and the two differ by float rounding (~1e-7 relative).
 * The layout belongs to the backend current at packing: using it after attn_set_backend changed
 * the backend is ATTN_STATUS_INVALID_ARGUMENT (pack again). It is a copy: changing B afterwards
 * does not change it. */
typedef enum {
    ATTN_PRECISION_F32 = 0, /* float32 products and sums (the default: PyTorch's numbers) */
    /* Both operands rounded to bfloat16 (round to nearest even; subnormals to zero), exact
     * products, float32 sums (AVX512-BF16 VDPBF16PS): twice the multiply-adds per instruction
     * of F32, half the weight memory, ~3 significant digits per operand. Opt-in; see
     * attn_gemm_pack_b_precision. */
    ATTN_PRECISION_BF16
} attn_precision;

/* Whether GEMMs in precision p can run under the current backend: F32 always; BF16 on the
 * avx512 backend of a CPU with AVX512-BF16, and on the ref backend (plain loops, for tests). */
bool attn_precision_available(attn_precision p);
/* ATTN_STATUS_OK when precision p is known and available (above); else
 * ATTN_STATUS_INVALID_ARGUMENT ("WHAT: unknown precision N") or ATTN_STATUS_UNSUPPORTED
 * ("WHAT: precision bf16 needs a CPU with AVX512-BF16 (backend B)"). The one check every
 * precision option goes through. */
attn_status attn_precision_check(attn_precision p, const char *what);
/* "f32", "bf16". */
const char *attn_precision_name(attn_precision p);
/* Parse a name as above ("fp32"/"float32", "bfloat16" too); ATTN_STATUS_INVALID_ARGUMENT if
 * unknown. */
attn_status attn_precision_parse(const char *name, attn_precision *out);

typedef struct {
    int K, N;             /* op(B) is (K, N) */
    attn_backend backend; /* whose layout data holds */
    attn_precision precision; /* F32: data holds floats; BF16: bfloat16 pairs (see below) */
    size_t n_floats;      /* 4-byte words of data */
    float *data;          /* (n_floats) the panels (attn_alloc'd; attn_gemm_packed_b_free) */
} attn_gemm_packed_b;

/* Pack op(B) (K, N): B stored (K, N) with row stride ldb if !trans_b, else (N, K). *out is
 * overwritten (free it with attn_gemm_packed_b_free). */
attn_status attn_gemm_pack_b(bool trans_b, int K, int N, const float *B, int ldb,
                             attn_gemm_packed_b *out);
/* The same in a chosen precision. BF16 rounds op(B) to bfloat16 here, once, and every
 * attn_gemm_packed with it rounds op(A) per call; C, alpha, beta, bias and the activation stay
 * float32. Results are NOT PyTorch's float32 ones: each element of A·B carries a relative error of
 * order 2^-9 per operand (measured on all-MiniLM-L6-v2 sentence embeddings: cosine to float32
 * >= 0.9999). The layout is the same on every backend that runs it:
 *   K is cut into blocks of kb = ceil(K / ceil(K / 512)) rows (the last may be shorter), each
 *   block's rows taken in pairs (an odd block's last pair padded with 0), N padded to Np, a
 *   multiple of 32; block b (rows from pc = b·kb, kp = ceil(rows / 2) pairs) starts at uint16
 *   b·ceil(kb / 2)·Np·2 and holds its Np/32 panels one after the other, each kp × 32 × 2:
 *   P16[start + p·kp·64 + q·64 + c·2 + h] = bf16(op(B)(pc + 2q + h, 32p + c)).
 * ATTN_STATUS_UNSUPPORTED when attn_precision_available(precision) is false. */
attn_status attn_gemm_pack_b_precision(bool trans_b, int K, int N, const float *B, int ldb,
                                       attn_precision precision, attn_gemm_packed_b *out);
/* attn_gemm in a chosen precision: F32 is attn_gemm itself; BF16 rounds op(A) and op(B) to
 * bfloat16 on every call (packing both), multiplies exactly and sums in float32, then the float32
 * epilogue — the arithmetic of PyTorch's CPU autocast to bfloat16 for a matmul, with a float32
 * result. ATTN_STATUS_UNSUPPORTED when attn_precision_available(precision) is false. */
attn_status attn_gemm_precision(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                const float *A, int lda, const float *B, int ldb, float beta,
                                float *C, int ldc, const float *bias, attn_act act,
                                attn_precision precision);
/* Frees p->data and zeroes *p; NULL or a zeroed struct is fine. */
void attn_gemm_packed_b_free(attn_gemm_packed_b *p);
/* C (M, N) = act(alpha · op(A) · op(B) + beta · C + bias), op(B) from B (its K and N must equal
 * the call's), op(A) and the rest as in attn_gemm. */
attn_status attn_gemm_packed(bool trans_a, int M, int N, int K, float alpha, const float *A,
                             int lda, const attn_gemm_packed_b *B, float beta, float *C, int ldc,
                             const float *bias, attn_act act);

/* ---- elementwise and row-wise kernels ------------------------------------------------------ */

/* y (N, D) = softmax over each row of x (N, D). y may equal x. */
attn_status attn_softmax_forward(int N, int D, const float *x, float *y);
/* dx (N, D) = y ⊙ (dy − rowsum(dy ⊙ y)). dx may equal dy. */
attn_status attn_softmax_backward(int N, int D, const float *y, const float *dy, float *dx);
/* y (N, D) = log_softmax over each row of x (N, D), in float32 as (x − max) − log Σ exp(x − max)
 * (the sum accumulated in double: ref exactly, SIMD in float blocks with double totals). A row of
 * only -inf gives -inf everywhere (PyTorch: NaN). y may equal x. What beam search scores
 * with (attn_hf_generate). */
attn_status attn_log_softmax_forward(int N, int D, const float *x, float *y);

/* Layer norm over the last dimension (biased variance, as PyTorch):
 *   y (N, C) = (x − mean) · rstd · w + b; mean (N) and rstd (N) saved for backward (or NULL).
 * w, b (C) may be NULL (1 and 0). */
attn_status attn_layernorm_forward(int N, int C, const float *x, const float *w, const float *b,
                                   float eps, float *y, float *mean, float *rstd);
/* dx (N, C) is overwritten; dw, db (C) are accumulated into (either may be NULL). */
attn_status attn_layernorm_backward(int N, int C, const float *x, const float *w,
                                    const float *mean, const float *rstd, const float *dy,
                                    float *dx, float *dw, float *db);

/* y (n) = act(x (n)). y may equal x. SiLU at x = −inf is −0 and its derivative 0; at +inf they
 * are +inf and 1 (PyTorch gives NaN for all four); finite inputs never give NaN or inf. */
attn_status attn_act_forward(attn_act act, size_t n, const float *x, float *y);
/* dx (n) = act'(x) ⊙ dy, with x the pre-activation input. dx may equal dy. ReLU's derivative at
 * 0 is 0 (PyTorch's). */
attn_status attn_act_backward(attn_act act, size_t n, const float *x, const float *dy, float *dx);

/* RMSNorm over the last dimension, as transformers' LlamaRMSNorm in float32:
 *   rstd = 1 / sqrt(mean(x²) + eps);  y (N, C) = (x · rstd) · w
 * rstd (N) saved for backward (or NULL); w (C) may be NULL (1). y may equal x. eps finite, >= 0.
 * The SIMD backends sum x² in float (in blocks, the block sums in double; rstd within ~1e-7 of
 * float64), so, as PyTorch's float32, a row with |x| beyond ~1e19 overflows to rstd = 0. */
attn_status attn_rmsnorm_forward(int N, int C, const float *x, const float *w, float eps,
                                 float *y, float *rstd);
/* dx = rstd · (g − x · rstd² · mean(g · x)), g = dy ⊙ w; dx (N, C) is overwritten (it may equal
 * dy); dw (C) += Σ_rows dy ⊙ x · rstd is accumulated into (may be NULL, and is computed also when
 * w is NULL). rstd (N) is the forward's. */
attn_status attn_rmsnorm_backward(int N, int C, const float *x, const float *w, const float *rstd,
                                  const float *dy, float *dx, float *dw);

/* Rotary position embeddings (RoPE), in place on the heads of N rows:
 *   x (N, ld): row n holds H heads of D floats at x[n·ld + h·D]; in each head the first R
 *   dimensions (R even, 2 <= R <= D) are rotated, the other D − R pass through (partial rotary).
 *   Pair i (0 <= i < R/2) turns by the angle pos[n] · inv_freq[i] with cos_t / sin_t (P, R/2)
 *   tables, cos_t[p·R/2 + i] = cos(p · inv_freq[i]) (the caller builds them once, scaling
 *   included); pos (N) in [0, P).
 *   ATTN_ROPE_HALF:        pairs (i, i + R/2) — rotate_half, transformers' Llama/Qwen/Mistral
 *   ATTN_ROPE_INTERLEAVED: pairs (2i, 2i + 1) — GPT-J, Meta's original Llama, GGUF
 *   (x_a, x_b) -> (x_a·cos − x_b·sin, x_b·cos + x_a·sin); inverse = true turns by −angle, which
 *   is the backward (the rotation is orthogonal: dx = R(−θ) dy).
 * Needs N >= 0, H, D > 0, ld >= H·D, P > 0; every pos[n] is checked (ATTN_STATUS_INVALID_ARGUMENT
 * naming the row otherwise, x untouched). Only the rotated dimensions are written. */
typedef enum {
    ATTN_ROPE_HALF = 0,
    ATTN_ROPE_INTERLEAVED
} attn_rope_mode;
attn_status attn_rope_apply(attn_rope_mode mode, int N, int H, int D, int R, float *x, int ld,
                            const int32_t *pos, int P, const float *cos_t, const float *sin_t,
                            bool inverse);
/* The tables of attn_rope_apply for positions 0 .. P−1: cos_t, sin_t (P, R/2) from
 * inv_freq (R/2), each angle (float)p · inv_freq[i] rounded to float first (as transformers
 * computes it in float32), then its cosine and sine in double, rounded to float (so within half
 * an ulp of the exact cos/sin of that float angle; transformers' float32 ones are within 1 ulp).
 * R even, >= 2; P >= 0. The same tables on every backend. */
attn_status attn_rope_tables(int P, int R, const float *inv_freq, float *cos_t, float *sin_t);

/* Gated linear unit (SwiGLU with SiLU, GeGLU with GELU, bilinear with NONE): h (N, F) =
 * act(g) ⊙ u, with g, u, h (N, F) at row strides ldg, ldu, ldh >= F (so g and u may be the two
 * halves of one (N, 2F) product: u = g + F, ldg = ldu = 2F). h may equal g or u with the same row
 * stride (element for element; any other overlap is not allowed). */
attn_status attn_glu_forward(attn_act act, int N, int F, const float *g, int ldg, const float *u,
                             int ldu, float *h, int ldh);
/* dg = dh ⊙ u ⊙ act'(g) and du = dh ⊙ act(g), both (N, F) at strides lddg, lddu, overwritten;
 * dg may equal g and du may equal u (in place), dh may equal either output — each with the same
 * row stride as what it equals (element for element); dg and du must differ. act' as in
 * attn_act_backward (ReLU's 0 at 0). */
attn_status attn_glu_backward(attn_act act, int N, int F, const float *g, int ldg, const float *u,
                              int ldu, const float *dh, int ldh, float *dg, int lddg, float *du,
                              int lddu);

/* out (N, C) = table (V, C)[ids (N)]. An id outside [0, V) is ATTN_STATUS_INVALID_ARGUMENT. */
attn_status attn_embedding_forward(int N, int V, int C, const int32_t *ids, const float *table,
                                   float *out);
/* dtable (V, C) += scatter of dout (N, C) by ids (N). */
attn_status attn_embedding_backward(int N, int V, int C, const int32_t *ids, const float *dout,
                                    float *dtable);

/* Cross-entropy as torch.nn.functional.cross_entropy(logits, targets, ignore_index=ignore_index,
 * label_smoothing=label_smoothing, reduction='mean'):
 *   logits (N, V), targets (N); rows whose target == ignore_index count for nothing; *loss is the
 *   mean over the other rows (0 if none). dlogits (N, V), if not NULL, receives d(*loss)/d(logits)
 *   (zero rows for ignored targets); it may equal logits. A target outside [0, V) that is not
 *   ignore_index is ATTN_STATUS_INVALID_ARGUMENT. */
attn_status attn_cross_entropy(int N, int V, const float *logits, const int32_t *targets,
                               int32_t ignore_index, float label_smoothing, float *loss,
                               float *dlogits);

/* ---- attention --------------------------------------------------------------------------- */

/* Multi-head scaled dot-product attention over head-interleaved rows:
 *   element (b, t, h, d) of Q is q[b*Tq*ldq + t*ldq + h*D + d]   (Q: (B, Tq, H, D), row stride ldq)
 *   and likewise K, V (B, Tk, H, D) with ldk, ldv and O (B, Tq, H, D) with ldo.
 * The layout is what a projection x · W_Q (B·T, H·D) gives, so no transposes are needed; with a
 * fused QKV projection (B·T, 3·H·D) pass q = qkv, k = qkv + H*D, v = qkv + 2*H*D, ld = 3*H*D.
 *
 * Masks: key j is visible to query i when
 *   (!causal || j <= i + causal_offset)  and  (kv_len == NULL || j < kv_len[b])
 *   and  (window == 0 || i + causal_offset − j < window).
 *   - encoder self-attention: causal = false, kv_len = NULL
 *   - decoder self-attention: causal = true, causal_offset = 0 (Tq == Tk), or Tk − Tq when the
 *     queries are the last Tq positions (a KV cache)
 *   - key padding: kv_len[b] = number of real keys of sequence b (0 <= kv_len[b] <= Tk)
 *   - cross-attention: Tq != Tk, causal = false, kv_len = source lengths
 *   - sliding window (Mistral, Qwen2): causal with window = W > 0: the query at position
 *     i + causal_offset sees its own key and the W − 1 before it (transformers' sliding_window:
 *     masked when j <= i + causal_offset − W). Key blocks wholly outside every query's window are
 *     never visited, so the cost is O(Tq · W), not O(Tq · Tk).
 * A query with no visible key gets output 0 (and lse = -inf), where PyTorch would give NaN; so
 * does a query whose visible keys all have bias -inf (see bias below). Under causal the window
 * never empties a row by itself (the query's own key j = i + causal_offset is inside it); a row
 * is empty only when causal_offset < −i, or when kv_len hides its keys (a padding query, whose
 * own position is >= kv_len[b], may then see none of the real keys within its window). */
typedef struct {
    int B, H, Tq, Tk, D;   /* batch, heads, query length, key length, head size */
    float scale;           /* multiplies q·k; 1/sqrt(D) for the usual attention */
    bool causal;
    int causal_offset;
    /* Sliding window: 0 none; else key j is visible to query i only when
     * (i + causal_offset) − j < window (the query's own position and the window − 1 before it).
     * Needs causal (ATTN_STATUS_INVALID_ARGUMENT otherwise); window >= 0. */
    int window;
    const int32_t *kv_len; /* (B) or NULL */
    int ldq, ldk, ldv, ldo; /* row strides in floats; ldq, ldo >= H*D, ldk, ldv >= H_kv*D */
    /* Grouped-query / multi-query attention: K and V have H_kv heads (0 means H; H_kv must
     * divide H), query head h reading key/value head h / (H / H_kv) — no K/V copies. Element
     * (b, t, g, d) of K is k[b*sbk + t*ldk + g*D + d]. The backward sums each K/V head's
     * gradient over the query heads of its group. */
    int H_kv;
    /* Batch strides in floats, 0 meaning the packed default (Tq·ldq, Tk·ldk, Tk·ldv, Tq·ldo):
     * a KV cache of capacity max_T per sequence is read with sbk = sbv = max_T·ld. Either sign;
     * batches must not overlap (|sb| >= (T − 1)·ld + the H·D or H_kv·D columns used). */
    ptrdiff_t sbq, sbk, sbv, sbo;
    /* Additive score bias (T5-style relative positions, ALiBi, arbitrary masks) or NULL: the
     * score of (b, h, i, j) is scale·q·k + bias[b·bias_sb + h·bias_sh + i·bias_sq + j] before the
     * softmax (a stride may be 0 to share the bias, e.g. bias_sb = 0 across the batch, or
     * negative: bias_sq = -1 reads a relative-position vector as a Toeplitz matrix). Entries
     * are finite or -inf (+inf and NaN are not checked and give NaN): -inf hides the key, and a
     * query whose visible keys are all hidden is treated as one with no visible key — o = 0,
     * lse = -inf, probabilities 0, no gradient. The SIMD kernels score in the log2 domain, so
     * finite entries below about -2e38 (e.g. torch.finfo(float32).min) count as -inf there. */
    const float *bias;
    ptrdiff_t bias_sb, bias_sh, bias_sq;
    /* Backward only: with bias, d loss / d bias (B, H, Tq, Tk) is written here when not NULL
     * (entry (b, h, i, j) at dbias[((b·H + h)·Tq + i)·Tk + j], masked entries 0; sum over b
     * yourself for a bias shared across the batch). */
    float *dbias;
    /* Forward only, optional: the keys again, transposed, as a decoding KV cache can keep them
     * (attn_nn_kv.kt): element (b, t, g, d) of K also at kt[b*sbkt + (g*D + d)*ldkt + t], with
     * the same values. Decoding steps (few queries) then read their keys for the scores from it
     * instead of transposing K every call: the same results, bit for bit. Columns up to Tk + 15
     * of each row are read (their values unused), so ldkt >= Tk + 16 and that much memory past
     * the last row's Tk columns; sbkt >= H_kv*D*ldkt (0: exactly that). NULL: not used. */
    const float *kt;
    ptrdiff_t ldkt, sbkt;
    /* Forward only, optional: binary16 copies of the keys and values that hold exactly the values
     * of K and V (a KV cache that rounds what it stores to binary16, attn_nn_kv.kt16 / v16):
     * kt16 laid out as kt (ldkt, sbkt; used instead of kt), v16 as V (ldv, sbv). Decoding steps
     * (few queries) read them instead of the floats, half the bytes, converted exactly: the same
     * results, bit for bit. v16 is read only when D is a multiple of the vector width (16 with
     * AVX-512, 8 with AVX2) and at most 8 vectors; the floats otherwise. NULL: not used. */
    const uint16_t *kt16;
    const uint16_t *v16;
} attn_attention_params;

/* Fills the usual defaults: scale = 1/sqrt(D), no mask (no window), ld* = H*D, H_kv = H,
 * packed batch strides, no bias. */
attn_attention_params attn_attention_default_params(int B, int H, int Tq, int Tk, int D);

/* o (B, Tq, H, D) = softmax(scale · q kᵀ + mask) v.
 * lse (B, H, Tq), if not NULL, receives each row's log-sum-exp of the masked, scaled scores (needed
 * by attn_attention_backward). probs (B, H, Tq, Tk), if not NULL, receives the attention weights
 * (masked entries 0); the fused path writes them without changing o. */
attn_status attn_attention_forward(const attn_attention_params *p, const float *q,
                                   const float *k, const float *v, float *o, float *lse,
                                   float *probs);

/* Gradients of attn_attention_forward given do_ (B, Tq, H, D, stride ldo) and the forward's o and
 * lse. dq, dk, dv use the row strides ldq, ldk, ldv (and batch strides sbq, sbk, sbv) and are
 * overwritten (only the H·D columns of each row — H_kv·D for dk, dv — are written, so they can
 * live inside one fused dQKV buffer). */
attn_status attn_attention_backward(const attn_attention_params *p, const float *q,
                                    const float *k, const float *v, const float *o,
                                    const float *lse, const float *do_, float *dq, float *dk,
                                    float *dv);

#ifdef __cplusplus
}
#endif
#endif

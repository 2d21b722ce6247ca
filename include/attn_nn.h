/* attn_nn.h — the block layer: the parts every Transformer family is built from, forward and
 * backward, on the kernels of attn_kernels.h. The families (attn_gpt.h, attn_bert.h,
 * attn_models.h, ...) are short compositions of these blocks plus a name map.
 *
 *   linear     y = act(x·Wᵀ + b), W stored (out, in) (nn.Linear) or (in, out) (GPT-2's Conv1D)
 *   norm       LayerNorm (with or without bias) and RMSNorm
 *   ffn        plain act(x·W1)·W2 (ReLU, GELU erf/tanh, SiLU) and gated (act(x·Wg) ⊙ x·Wu)·Wd
 *              (SwiGLU, GeGLU)
 *   attention  self or cross; fused or separate QKV; multi-head, grouped-query and multi-query;
 *              per-head q/k RMSNorms (Qwen3); rotary embeddings; causal, sliding-window,
 *              padding, cross and variable-length masks; an additive score bias; KV-cache append
 *              for incremental decoding; attention capture
 *   dropout    one scheme for every family: the mask of an element is a pure function of
 *              (seed, step, site, global row, column), so it depends neither on the thread count
 *              nor on how a batch is split over data-parallel replicas
 *   sublayer   the residual wiring around an attention or FFN function:
 *                pre-norm:  out = x + drop(f(norm(x)))      (GPT-2, Llama, pre-LN Transformer)
 *                post-norm: out = norm(x + drop(f(x)))      (BERT, the original Transformer)
 *
 * Conventions. Rows are tokens: a batch of activations is a row-major (M, C) matrix, M the
 * number of rows the call computes. Weights are read-only views (float pointers into the
 * family's one parameter buffer); gradients are views of the same shape into the gradient
 * buffer, ACCUMULATED (+=) by every backward. Activations a backward needs live in caller-owned
 * *_acts structs; every pointer documents its shape. Every matrix product runs in the run's
 * precision (attn_nn_run.precision). The library never prints; every failure returns a status
 * with attn_last_error(). */
#ifndef ATTN_NN_H
#define ATTN_NN_H

#include "attn_core.h"
#include "attn_kernels.h"
#include "attn_quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== the run ================================================================================ */

/* What a forward or backward call is running for; one per state, passed to every block. */
typedef struct {
    attn_precision precision; /* of every matrix product (ATTN_PRECISION_F32: PyTorch's numbers) */
    bool training;            /* dropout on (where a block's probability is > 0) */
    uint64_t seed, step;      /* the dropout masks' key */
    /* Latency over row independence: nn.Linear products of 9..48 rows go through the GEMM's
     * direct small-M path in chunks of 8 rows (~1.5x faster than its packed path for a short
     * sentence, measured on all-MiniLM-L6-v2), so a row's result may then differ in the last bit
     * from the same row in a larger batch. Off by default. Row independence then holds for
     * pre-packed weights (always the panel path) and for calls of more than 8 rows; a call of
     * 8 rows or fewer on unpacked weights takes attn_gemm's direct path, whose sums may differ in
     * the last bit (~2e-7) from the blocked path's. The translator packs its decoder for this.
     * Quantized weights: products of 9..24 rows (int8 activations: of any M > 8) run as
     * chunks of 8 rows, each a decoding-sized product (attn_quant_gemm_batch: the M <= 8 path,
     * in the run's quant_act): a batched decoding step of several sequences
     * (attn_gpt_decode_batch). */
    bool few_rows;
    /* Linear maps on quantized weights (attn_nn_linear.qw): whether decoding-sized products
     * (M <= 8 rows) round the activations to int8 per 32 for integer dot products
     * (ATTN_QUANT_ACT_Q8: llama.cpp's arithmetic, faster, ~1e-3 relative error) or keep them
     * float32 (ATTN_QUANT_ACT_F32, the default: the product with the dequantized weights).
     * See attn_quant.h. */
    attn_quant_act quant_act;
} attn_nn_run;

/* Evaluation in float32. */
attn_nn_run attn_nn_default_run(void);

/* Which global rows a buffer's rows are, for dropout. Local row r of a buffer with t_local rows
 * per sequence is global row (row0 + r / t_local) · t_global + r % t_local: row0 is the index of
 * the buffer's first sequence in the whole batch, t_global the rows per sequence of the whole
 * batch's numbering. So a data-parallel replica holding sequences b0.. of a padded batch, with its
 * own (trimmed) length, passes {b0, its T, the batch's T}; variable-length packed rows pass
 * {first packed row, 1, 1}; a plain batch passes {0, T, T}. */
typedef struct {
    int64_t row0;
    int t_local, t_global;
} attn_nn_rows;

attn_nn_rows attn_nn_rows_plain(int T); /* {0, T, T} */

/* ==== dropout ================================================================================ */

/* Element (global row g, column c) of site `site` is dropped with probability p when the top 24
 * bits of mix64(key ^ (g·C + c)·0xD6E8FEB86659FD93) fall below p·2^24, with
 * key = mix64(mix64(mix64(seed) ^ step) ^ site) and mix64 SplitMix64's finalizer; kept elements
 * are scaled by 1 / (1 − p). This is attn_encdec_dropout's generator with element index g·C + c
 * (tests/test_encdec.c and the PyTorch twins re-implement it).
 *
 * out (M, C) = base + drop(y) (base NULL: out = drop(y)) for rows M of width C numbered by rows;
 * the keep bits go to mask (M · ceil(C / 64) words, row r's at r · ceil(C / 64)) when not NULL.
 * out may equal y or base. p <= 0: out = base + y exactly; p >= 1: everything dropped. */
void attn_nn_dropout_fwd(const attn_nn_run *run, uint32_t site, float p, attn_nn_rows rows, int M,
                         int C, const float *base, const float *y, float *out, uint64_t *mask);
/* (The caller decides whether dropout runs: these draw for any p > 0, whatever run->training.)
 * out (M, C) = drop(g) from the bits attn_nn_dropout_fwd recorded; out may equal g. */
void attn_nn_dropout_bwd(float p, int M, int C, const uint64_t *mask, const float *g, float *out);
/* Words of a mask for M rows of width C. */
size_t attn_nn_dropout_words(int M, int C);

/* ==== names in configuration files =========================================================== */
/* Each parse fails with ATTN_STATUS_UNSUPPORTED and a one-line message "WHAT: unknown ... \"x\"
 * (expected ...)", where the caller passes WHAT as "FILE: field" so the message names both. */

/* transformers' ACT2FN names: "gelu", "gelu_python" (erf form); "gelu_new", "gelu_pytorch_tanh",
 * "gelu_fast", "gelu_accurate" (tanh form); "relu"; "silu", "swish"; "linear"/"identity" (none). */
attn_status attn_act_parse(const char *name, const char *what, attn_act *out);
/* The name a config file gets: "gelu", "gelu_new", "relu", "silu", "linear". */
const char *attn_act_name(attn_act act);
/* "half" (rotate_half: transformers' Llama, Qwen, Mistral, GPT-NeoX) or "interleaved" (GPT-J,
 * Meta's Llama, GGUF). */
attn_status attn_rope_mode_parse(const char *name, const char *what, attn_rope_mode *out);
const char *attn_rope_mode_name(attn_rope_mode mode);

/* ==== linear ================================================================================= */

typedef enum {
    ATTN_NN_OUT_IN = 0, /* w (out, in): torch.nn.Linear, Hugging Face BERT, Llama, Marian */
    ATTN_NN_IN_OUT      /* w (in, out): GPT-2's Conv1D */
} attn_nn_layout;

/* A linear map's weights (or, with the same fields, its gradients). */
typedef struct {
    float *w;               /* (out, in) [OUT_IN] or (in, out) [IN_OUT], row stride ldw */
    float *b;               /* (out) or NULL: no bias */
    int in, out;            /* K, N */
    attn_nn_layout layout;
    int ldw;                /* row stride of w in floats; 0 = dense (in for OUT_IN, out for IN_OUT) */
    /* op(W) = Wᵀ (in, out) pre-packed for the GEMM (attn_nn_linear_pack), or NULL. Used by
     * forwards outside training when its backend is current; never by a backward. */
    const attn_gemm_packed_b *packed;
    /* Quantized weights, for inference: when qw is not NULL the map's weight is W (out, in) of
     * type qtype stored row by row as GGUF stores it (attn_quant.h: out rows of
     * attn_quant_row_bytes(qtype, in) bytes; in a multiple of the type's block), read in place
     * (a mapped file is fine) and never written; w, ldw, layout and packed are then unused.
     * Forwards run attn_quant_gemm (the bias and activation in its epilogue, the activation mode
     * from attn_nn_run.quant_act); backwards and packing refuse such a map. qw NULL (the zeroed
     * default): the float32 weight w. */
    attn_qtype qtype;
    const void *qw; /* (out, in) quantized, or NULL */
    /* qw repacked for the SIMD products (attn_quant_pack: the same matrix in the x8 layout), or
     * NULL; forwards use it when set. qw stays valid (attn_nn_linear_rows falls back to it).
     * An ATTN_QTYPE_I8 matrix (attn_quant_pack_i8: CTranslate2's int8) has no row layout: qpacked
     * alone, qw NULL, and w the float32 weight it was made from, which attn_nn_linear_rows (a
     * slice of the rows) then uses: a slice of an I8 map computes in float32. Backwards and
     * packing refuse a map with qw or qpacked. */
    const attn_quant_packed *qpacked;
} attn_nn_linear;

attn_nn_linear attn_nn_linear_make(float *w, float *b, int in, int out, attn_nn_layout layout);
/* A map on quantized weights qw (out, in) of type qtype (see attn_nn_linear.qw); b (out) or
 * NULL. */
attn_nn_linear attn_nn_linear_make_quant(attn_qtype qtype, const void *qw, float *b, int in,
                                         int out);
/* Whether L runs on quantized weights (qw or qpacked set): forwards take attn_quant_gemm*,
 * backwards and packing refuse it. */
bool attn_nn_linear_quantized(const attn_nn_linear *L);
/* Rows [r0, r0 + n) of an (out, in) map (OUT_IN float weights or quantized ones) as a map of n
 * outputs: its weight rows and bias entries (no packed panels). */
attn_nn_linear attn_nn_linear_rows(const attn_nn_linear *L, int r0, int n);

/* y (M, out; row stride ldy) = act(x (M, in; ldx) · Wᵀ + b + beta·y). beta == 0: y is not read.
 * act is fused into the GEMM's epilogue. */
attn_status attn_nn_linear_forward(const attn_nn_run *run, const attn_nn_linear *L, int M,
                                   const float *x, int ldx, float beta, float *y, int ldy,
                                   attn_act act);
/* Backward of a linear map without activation (apply act's derivative to dy first):
 *   dx (M, in; lddx) = dy · W, or += when accumulate; skipped when dx is NULL;
 *   g->w += the weight gradient (in g's layout, which must be L's), g->b += colsum(dy);
 *   skipped when g is NULL (or g->b NULL). */
attn_status attn_nn_linear_backward(const attn_nn_run *run, const attn_nn_linear *L, int M,
                                    const float *x, int ldx, const float *dy, int lddy, float *dx,
                                    int lddx, bool accumulate, const attn_nn_linear *g);

/* Maps a, b and c (c may be NULL: two) over the same input as one map with their outputs one
 * after the other (a's, then b's, then c's), when they are dense OUT_IN views adjacent in memory:
 * b's rows right after a's, c's after b's, and their biases likewise (or all NULL); the result
 * has no packed panels. false (out untouched) otherwise, and when any of them is packed. So q, k,
 * v (or gate, up) laid out one after the other run as one GEMM. */
bool attn_nn_linear_fuse(const attn_nn_linear *a, const attn_nn_linear *b, const attn_nn_linear *c,
                         attn_nn_linear *out);

/* Pack L's weight in a precision (attn_gemm_pack_b_precision) into *out, the caller's (free with
 * attn_gemm_packed_b_free); then set L->packed = out to use it. */
attn_status attn_nn_linear_pack(const attn_nn_linear *L, attn_precision precision,
                                attn_gemm_packed_b *out);

/* out (cols) += column sums of a (rows, cols; row stride lda): a bias gradient. Threaded over
 * column blocks; the order of the sums over rows is fixed (deterministic on any thread count). */
void attn_nn_colsum_add(int rows, int cols, const float *a, int lda, float *out);

/* ==== norms ================================================================================== */

typedef enum {
    ATTN_NORM_LAYER = 0, /* (x − mean) · rstd · w + b   (nn.LayerNorm; b NULL: no bias) */
    ATTN_NORM_RMS        /* x · rstd · w, rstd = 1/sqrt(mean(x²) + eps)  (LlamaRMSNorm) */
} attn_norm_kind;

typedef struct {
    attn_norm_kind kind;
    int dim;      /* C */
    float eps;
    float *w;     /* (C) gain, or NULL (1) */
    float *b;     /* (C) LayerNorm bias, or NULL (0); always NULL for RMS */
} attn_nn_norm;

/* "layer_norm", "rms_norm". */
const char *attn_norm_kind_name(attn_norm_kind k);
/* Parses the names above (and "layernorm", "rmsnorm"); ATTN_STATUS_UNSUPPORTED naming what. */
attn_status attn_norm_kind_parse(const char *name, const char *what, attn_norm_kind *out);

/* y (M, C) = norm(x (M, C)); mean (M) (LayerNorm only) and rstd (M) saved for backward, or NULL.
 * y may equal x. */
attn_status attn_nn_norm_forward(const attn_nn_norm *n, int M, const float *x, float *y,
                                 float *mean, float *rstd);
/* dx (M, C) = d norm / d x applied to dy, or += when accumulate (then dx must not alias dy);
 * g->w, g->b accumulated (g may be NULL). tmp (M, C) is scratch, needed only when accumulate. */
attn_status attn_nn_norm_backward(const attn_nn_norm *n, const attn_nn_norm *g, int M,
                                  const float *x, const float *mean, const float *rstd,
                                  const float *dy, float *dx, bool accumulate, float *tmp);

/* ==== feed-forward =========================================================================== */

typedef enum {
    ATTN_FFN_PLAIN = 0, /* down(act(up(x)))                        (GPT-2, BERT, Transformer) */
    ATTN_FFN_GATED      /* down(act(gate(x)) ⊙ up(x))               (Llama: SwiGLU; GeGLU) */
} attn_ffn_kind;

typedef struct {
    attn_ffn_kind kind;
    attn_act act;
    attn_nn_linear up;   /* C -> F: W1 (plain) or W_up (gated) */
    attn_nn_linear gate; /* C -> F: W_gate (gated only). When gate and up are one (2F, C) matrix,
                            gate rows first (gate.w + F·C == up.w, biases likewise, both OUT_IN),
                            one GEMM computes both */
    attn_nn_linear down; /* F -> C */
    /* The fused gate|up pair (C -> 2F, adjacent as above) pre-packed (attn_nn_linear_pack of the
     * pair), or NULL: used by forwards outside training, as attn_nn_linear.packed */
    const attn_gemm_packed_b *pair_packed;
} attn_nn_ffn;

/* What an FFN keeps for backward, over M rows (F = up.out). */
typedef struct {
    float *u;  /* (M, F) up(x) pre-activation (plain: needed for backward unless act is ReLU or
                  NONE; gated: up(x)); NULL in evaluation */
    float *g;  /* (M, F) gate(x) pre-activation (gated only); with a fused gate|up the pair is one
                  (M, 2F) buffer at g (u = g + F, row stride 2F) */
    float *h;  /* (M, F) the hidden activation fed to down */
} attn_nn_ffn_acts;

/* Floats of the acts' buffers for M rows (training: everything backward needs; evaluation: h
 * and, for gated, the g|u pair). */
size_t attn_nn_ffn_acts_floats(const attn_nn_ffn *f, int M, bool training);
/* Lays out acts over buf (attn_nn_ffn_acts_floats floats). */
void attn_nn_ffn_acts_view(const attn_nn_ffn *f, int M, bool training, float *buf,
                           attn_nn_ffn_acts *a);

/* y (M, C) = ffn(x (M, C)) + beta·y. */
attn_status attn_nn_ffn_forward(const attn_nn_run *run, const attn_nn_ffn *f, int M,
                                const float *x, attn_nn_ffn_acts *a, float beta, float *y);
/* dx (M, C) = d ffn / d x applied to dy (M, C), or += when accumulate; gradients accumulated
 * into g. work: attn_nn_ffn_work_floats floats of scratch. */
attn_status attn_nn_ffn_backward(const attn_nn_run *run, const attn_nn_ffn *f,
                                 const attn_nn_ffn *g, int M, const float *x,
                                 const attn_nn_ffn_acts *a, const float *dy, float *dx,
                                 bool accumulate, float *work);
size_t attn_nn_ffn_work_floats(const attn_nn_ffn *f, int M);

/* ==== attention ============================================================================== */

typedef struct {
    int d_model;   /* C: width of the queries' input x and of the output */
    int d_kv;      /* width of the key/value source: C for self-attention, the encoder's for cross */
    int n_head;    /* H */
    int n_kv_head; /* H_kv: divides H (H: multi-head; 1: multi-query; else grouped-query) */
    int d_head;    /* D (H·D need not equal C) */
    float scale;   /* multiplies q·k; 0 means 1/sqrt(D) */
    bool causal;   /* decoder self-attention: query i sees keys j <= i (+ the cache's length) */
    bool cross;    /* keys/values from a separate source (cross-attention) */
    /* Rotary embeddings on q and k (self-attention): rope_dim = R rotated dims per head (0: no
     * RoPE), tables (rope_P, R/2) from attn_rope_tables. */
    int rope_dim;
    attn_rope_mode rope_mode;
    int rope_P;
    const float *rope_cos, *rope_sin;
    /* Sliding window (Mistral's sliding_window, Qwen2's with use_sliding_window): 0 none; else
     * key j is visible to query i only when (i + causal_offset) − j < window, i.e. the query at
     * position p sees keys p − window + 1 .. p (attn_attention_params.window; with a KV cache,
     * positions count from the cache's start). Self-attention with causal only; every layout
     * (padded, KV cache, variable-length). */
    int window;
} attn_nn_attn_cfg;

/* Multi-head attention with H_kv = H, D = C / H, no RoPE; self-attention. */
attn_nn_attn_cfg attn_nn_attn_default_cfg(int d_model, int n_head);
/* Sizes positive, H_kv dividing H, R even and <= D with tables, window >= 0 (and > 0 only for
 * causal self-attention), widths without overflow. The message names `what` and the field. */
attn_status attn_nn_attn_cfg_check(const attn_nn_attn_cfg *c, const char *what);

/* Projections. Self-attention: either qkv (one fused map to (H + 2·H_kv)·D outputs, q | k | v)
 * or q, k, v separately; when q, k, v are OUT_IN views that are adjacent in memory (k.w right
 * after q.w, v.w after k.w, biases likewise) one GEMM computes all three. Cross-attention: q
 * from x, and kv (fused, (2·H_kv·D) outputs, k | v) or k, v from the source. o: H·D -> C.
 * q/k norms (Qwen3's q_norm, k_norm; self-attention only): each query head's and each key head's
 * D projected values go through an RMSNorm (kind ATTN_NORM_RMS, dim D) after the projection and
 * before RoPE, so the KV cache holds normalized, rotated keys. As gradient views, q_norm.w and
 * k_norm.w accumulate the norms' weight gradients (w NULL: not computed). */
typedef struct {
    attn_nn_linear qkv, q, k, v, kv, o;
    attn_nn_norm q_norm; /* RMSNorm over each query head's D dims, weight (D); .dim == 0: none */
    attn_nn_norm k_norm; /* the same over each key head (H_kv heads), weight (D) */
} attn_nn_attn;

/* How the rows of a call form sequences (notes for a KV cache: Tk is unused by self-attention
 * with a cache but must be > 0; kv_len[b] then counts the cache's keys and must be <= pos0 + Tq;
 * a score bias is indexed by the call's queries, so offset it by pos0 · bias_sq yourself).
 * Padded layout (off == NULL): sequence b's queries are rows b·Tq .. b·Tq + Tq − 1 of x and its
 * keys rows b·Tk .. of the key source (self-attention without cache: Tk = Tq); kv_len (B), when
 * not NULL, hides keys t >= kv_len[b] (padding).
 * Variable-length layout (off != NULL, self-attention only): sequence b is rows
 * off[b] .. off[b+1] − 1, attending over its own rows only (BERT's packed rows); Tq = Tk = the
 * longest sequence (capture layout).
 * pos0: the position of each sequence's first query row (the cache length when decoding); RoPE
 * uses pos0 + t, or pos (M) when given. */
typedef struct {
    int B, Tq, Tk;
    const int32_t *kv_len;
    const int32_t *off;
    int pos0;
    const int32_t *pos;
    /* Additive score bias (attn_attention_params.bias, same strides; padded layout), or NULL;
     * dbias (B, H, Tq, Tk) receives its gradient in backward when not NULL. */
    const float *bias;
    ptrdiff_t bias_sb, bias_sh, bias_sq;
    float *dbias;
    /* Ragged KV cache (self-attention with a cache, evaluation only): B sequences that each have
     * their own cache length, e.g. one new token for each of several requests, or a new
     * request's prompt beside them (variable-length layout: sequence b's rows off[b] ..
     * off[b + 1] − 1, n_b of them, Tq >= every n_b; padded: n_b = Tq).
     * pos0s (B), when not NULL, replaces pos0 per sequence: sequence b's n_b rows are appended
     * at its positions pos0s[b] .. pos0s[b] + n_b − 1, take those RoPE positions (unless pos is
     * given) and attend over its first pos0s[b] + n_b cached keys (causal, window as usual).
     * slot (B), when not NULL, maps the call's sequence b to the cache's sequence slot[b] (distinct
     * entries in [0, cache->B): a subset of a cache's sequences in any order; cache->B may then
     * differ from B). Not with kv_len, a score bias or captured probabilities. */
    const int32_t *pos0s;
    const int32_t *slot;
} attn_nn_seqs;

/* Padded layout of B sequences of T rows, no padding, positions from 0. */
attn_nn_seqs attn_nn_seqs_dense(int B, int Tq, int Tk);

/* One layer's key/value cache: row t of sequence b holds the H_kv·D key floats at
 * k + (b·max_T + t)·ld and the values at v + (b·max_T + t)·ld, heads interleaved along each row
 * as the attention kernel reads them; ld = 0 means H_kv·D (separate k and v arrays). With
 * v == k + H_kv·D and ld == 2·H_kv·D the keys and values share rows (one GEMM fills both).
 * Self-attention appends its new rows at positions pos0 .. (the caller keeps the length:
 * attn_nn_seqs.pos0); cross-attention reads what attn_nn_attention_cross_kv stored (Tk = the
 * source length).
 * kt, when not NULL, holds the keys again, transposed for decoding: key t's element c (of the
 * H_kv·D) of sequence b at kt[(b·H_kv·D + c)·ldkt + t], ldkt >= max_T + 16 (attn_nn_kv_ldkt), the
 * memory zeroed when made (columns past a sequence's length are read, unused). Self-attention
 * appends its keys there too and cross-attention's attn_nn_attention_cross_kv fills it; decoding
 * steps (a few queries per sequence) then read their scores' keys from it instead of transposing
 * the cached keys at every step: the same results, bit for bit; memory: half the cache again. */
typedef struct {
    float *k, *v; /* (B, max_T, ld) each */
    int B, max_T;
    int ld;
    float *kt;    /* (B, H_kv·D, ldkt) or NULL */
    int ldkt;
    /* f16: self-attention stores every key and value rounded to binary16 (round to nearest
     * even; k, v and kt then hold exactly those values, as floats), as llama.cpp's default f16
     * cache does, and keeps the halves in kt16 / v16 when not NULL: kt16 laid out as kt, v16
     * as v (zeroed when made). Decoding steps read the halves (attn_attention_params.kt16,
     * v16), half the bytes, with the same results as from the floats, bit for bit; prompt
     * passes read the floats. */
    bool f16;
    uint16_t *kt16; /* (B, H_kv·D, ldkt) or NULL */
    uint16_t *v16;  /* (B, max_T, ld) or NULL */
} attn_nn_kv;

/* The row stride of attn_nn_kv.kt for a cache of max_T positions. */
int attn_nn_kv_ldkt(int max_T);

/* What attention keeps over a call (Mq query rows, Mk key rows; W = (H + 2·H_kv)·D):
 * proj: self (Mq, W) q | k | v per row (after the q/k norms and RoPE); cross: q (Mq, H·D)
 *       followed by k|v (Mk, 2·H_kv·D);
 * ctx (Mq, H·D) the attention output before o; lse (B·H·Tq; varlen: H·M) for backward, or NULL
 * in evaluation;
 * with q/k norms, for backward (NULL in evaluation, where the norms need no extra memory):
 * qk (attn_nn_attn_qk_floats) the projected q and k before their norms, as rows of D: the
 *    Mq·H query heads (Mq, H·D), then the Mq·H_kv key heads (Mq, H_kv·D);
 * qk_rstd (Mq·(H + H_kv)) the norms' 1/rms of those rows, in the same order. */
typedef struct {
    float *proj;
    float *ctx;
    float *lse;
    float *qk;
    float *qk_rstd;
} attn_nn_attn_acts;

/* Floats of proj for Mq query and Mk key rows (Mk ignored for self-attention). */
size_t attn_nn_attn_proj_floats(const attn_nn_attn_cfg *c, int Mq, int Mk);
/* Floats of qk for Mq query rows: Mq·(H + H_kv)·D (qk_rstd: Mq·(H + H_kv)). Needed (with
 * qk_rstd) only for the backward of attention with q/k norms. */
size_t attn_nn_attn_qk_floats(const attn_nn_attn_cfg *c, int Mq);

/* Self-attention (cfg->cross false): y (Mq, C) = o(attention(q, k, v)) + beta·y with q, k, v
 * projected from x (Mq, C) (src NULL). With cache: the new k, v rows are appended to the cache at
 * positions pos0 .. pos0 + Tq − 1 of each sequence and the queries attend over the cache's first
 * pos0 + Tq positions (causal over them when cfg->causal); padded layout only.
 * Cross-attention (cfg->cross): keys and values from src (Mk = B·Tk rows of d_kv), or, with
 * cache, from the cache (src ignored).
 * probs (B, H, Tq, Tk) (Tk: the keys visible to the call, the cache's included), masked entries
 * 0, or NULL: the attention probabilities (capture). a->lse NULL: no backward. */
attn_status attn_nn_attention_forward(const attn_nn_run *run, const attn_nn_attn_cfg *cfg,
                                      const attn_nn_attn *w, const attn_nn_seqs *s,
                                      const float *x, const float *src, const attn_nn_kv *cache,
                                      attn_nn_attn_acts *a, float *probs, float beta, float *y);
/* Gradients of the last forward on a (no cache) given dy (Mq, C): dx (Mq, C) = d / d x (self:
 * through q, k and v, and the q/k norms: a->qk and a->qk_rstd must then have been given to the
 * forward), or += when accumulate; for cross-attention d / d src is ADDED into dsrc
 * (Mk, d_kv) (several decoder layers read one encoder output), which must be NULL for
 * self-attention; parameter gradients accumulated into g. work: attn_nn_attn_work_floats
 * floats. */
attn_status attn_nn_attention_backward(const attn_nn_run *run, const attn_nn_attn_cfg *cfg,
                                       const attn_nn_attn *w, const attn_nn_attn *g,
                                       const attn_nn_seqs *s, const float *x, const float *src,
                                       const attn_nn_attn_acts *a, const float *dy, float *dx,
                                       bool accumulate, float *dsrc, float *work);
size_t attn_nn_attn_work_floats(const attn_nn_attn_cfg *c, int Mq, int Mk);

/* Cross-attention's keys and values of a source (B sequences of Tk rows, src (B·Tk, d_kv)) into
 * cache (positions 0 .. Tk − 1): computed once per source, read by every decoding step. */
attn_status attn_nn_attention_cross_kv(const attn_nn_run *run, const attn_nn_attn_cfg *cfg,
                                       const attn_nn_attn *w, int B, int Tk, const float *src,
                                       const attn_nn_kv *cache);

/* ==== sub-layers ============================================================================= */

typedef enum {
    ATTN_SUB_ATTN = 0, /* f = attention (self or cross, per its cfg) */
    ATTN_SUB_FFN       /* f = feed-forward */
} attn_nn_sub_kind;

/* One residual sub-layer: out = x + drop(f(norm(x))) (pre_norm) or norm(x + drop(f(x))). */
typedef struct {
    attn_nn_sub_kind kind;
    bool pre_norm;
    attn_nn_norm norm;          /* the sub-layer's norm (weights or gradients) */
    const attn_nn_attn_cfg *acfg; /* ATTN_SUB_ATTN */
    attn_nn_attn attn;          /* ATTN_SUB_ATTN */
    attn_nn_ffn ffn;            /* ATTN_SUB_FFN */
    float p_drop;               /* residual dropout probability (training only) */
    uint32_t site;              /* dropout site */
} attn_nn_sublayer;

/* A sub-layer's activations over M rows of width C. Training keeps all of them; evaluation
 * needs only ln (pre-norm input of f / post-norm output) and res. */
typedef struct {
    float *ln;            /* (M, C) norm output: pre-norm f's input; post-norm the sub-layer output */
    float *mean, *rstd;   /* (M) norm statistics (mean: LayerNorm only), or NULL in evaluation */
    float *res;           /* (M, C) x + drop(f(.)): pre-norm the sub-layer output */
    uint64_t *mask;       /* (attn_nn_dropout_words(M, C)) keep bits, training with dropout */
    attn_nn_attn_acts attn;
    attn_nn_ffn_acts ffn;
} attn_nn_sub_acts;

/* The sub-layer's output within its acts: res (pre-norm) or ln (post-norm). */
float *attn_nn_sub_output(const attn_nn_sublayer *S, const attn_nn_sub_acts *A);

/* Forward of one sub-layer over the rows of s (M = rows computed): out = its output (written
 * into A->res or A->ln, see attn_nn_sub_output; with pre-norm A->res may equal x: the sub-layer
 * then updates the stream in place). rows numbers the rows for dropout. src / cache / probs as
 * attn_nn_attention_forward (ignored by FFN sub-layers). tmp (M, C) scratch, used only for
 * dropout. */
attn_status attn_nn_sub_forward(const attn_nn_run *run, const attn_nn_sublayer *S,
                                const attn_nn_seqs *s, int M, attn_nn_rows rows, const float *x,
                                const float *src, const attn_nn_kv *cache, attn_nn_sub_acts *A,
                                float *probs, float *tmp);

/* Backward of one sub-layer. G (M, C): in, d loss / d its output; out, d loss / d x. Parameter
 * gradients accumulated into Gs (the sub-layer's gradient views: norm, attn or ffn). dsrc
 * (cross-attention): d loss / d src ADDED into it (several decoder layers read one encoder
 * output). work: attn_nn_sub_work_floats floats. */
attn_status attn_nn_sub_backward(const attn_nn_run *run, const attn_nn_sublayer *S,
                                 const attn_nn_sublayer *Gs, const attn_nn_seqs *s, int M,
                                 const float *x, const float *src, attn_nn_sub_acts *A, float *G,
                                 float *dsrc, float *work);
size_t attn_nn_sub_work_floats(const attn_nn_sublayer *S, int M, int Mk);

/* ==== capture of an attention sub-layer's internals ========================================= */

/* What one attention sub-layer computed in a forward, for inspection (attn_explain.h: the
 * article's steps on a real model). A model with such a capture set for a layer
 * (attn_gpt_set_attn_capture, attn_bert_set_attn_capture, attn_encdec_set_attn_capture) calls
 * attn_nn_attn_capture_take after that layer's attention sub-layer ran: it copies the rows the
 * block read and what it computed from them into buffers the capture owns, and records which
 * block ran (its configuration and views of the model's weights, valid while the model lives).
 * Rows are the call's: Mq query rows, Mk key rows (self-attention: Mk = Mq), as the model lays
 * them out (one sentence: its T tokens). Start from a zeroed struct; free with
 * attn_nn_attn_capture_free (a later take replaces what an earlier one kept). */
typedef struct {
    bool taken;           /* a forward filled what follows */
    int Mq, Mk;
    attn_nn_attn_cfg cfg; /* the block's configuration (RoPE tables: the model's) */
    attn_nn_attn w;       /* the block's weights (views into the model) */
    attn_nn_norm norm;    /* the sub-layer's norm: before the block (pre_norm) or after it */
    bool pre_norm;
    float *x;    /* (Mq, C) the rows the queries are projected from: norm(stream) for a pre-norm
                    sub-layer, the stream for a post-norm one (self-attention: the keys and
                    values too) */
    float *src;  /* (Mk, d_kv) cross-attention's key/value source (the encoder output); NULL for
                    self-attention */
    float *proj; /* (attn_nn_attn_proj_floats(&cfg, Mq, Mk)) attn_nn_attn_acts.proj: self-attention
                    (Mq, (H + 2·H_kv)·D) q | k | v per row, after the q/k norms and RoPE;
                    cross-attention q (Mq, H·D) then k | v (Mk, 2·H_kv·D) */
    float *ctx;  /* (Mq, H·D) each head's weighted sum of values, before the output projection */
} attn_nn_attn_capture;

/* Copy into cap what the attention sub-layer S computed in the forward that just ran on x (Mq, C)
 * (its input, as given to attn_nn_sub_forward), src (Mk, d_kv) (cross-attention, else NULL) with
 * acts A. ATTN_STATUS_INVALID_ARGUMENT when S is not an attention sub-layer, OUT_OF_MEMORY. */
attn_status attn_nn_attn_capture_take(attn_nn_attn_capture *cap, const attn_nn_sublayer *S, int Mq,
                                      int Mk, const float *x, const float *src,
                                      const attn_nn_sub_acts *A);
void attn_nn_attn_capture_free(attn_nn_attn_capture *cap);

/* ==== the classic multi-head attention layer (prefix attn_mha_) ===============================
 * The attention sub-layer above with nn.Linear weights in one block, kept as a small standalone
 * API (tests/test_mha.c checks it against PyTorch): self-attention (encoder: no mask; decoder:
 * causal) and cross-attention, each with optional key padding.
 *
 *   attn_mha_config cfg = attn_mha_default_config(384, 6);          // C = 384, H = 6, D = 64
 *   float *params = attn_alloc(attn_mha_num_params(&cfg) * sizeof(float));
 *   attn_mha_weights w;  attn_mha_weights_view(&cfg, params, &w);   // views into one buffer
 *   attn_mha_state *st;  attn_mha_state_init(&cfg, B, T, T, &st);
 *   attn_mha_mask m = {.causal = true};
 *   attn_mha_forward(&cfg, &w, st, B, T, T, x, NULL, &m, y, NULL);  // decoder self-attention
 *   attn_mha_backward(&cfg, &w, st, B, T, T, x, NULL, &m, dy, dx, NULL, &grads); */

typedef struct {
    int d_model; /* C:   width of the query input x and of the output y */
    int d_kv;    /* Ckv: width of the key/value source (= d_model for self-attention) */
    int n_head;  /* H */
    int d_head;  /* D (H·D need not equal C) */
    bool bias;   /* whether the four projections have biases */
} attn_mha_config;

/* d_kv = d_model, d_head = d_model / n_head, bias = true. */
attn_mha_config attn_mha_default_config(int d_model, int n_head);

/* Validates sizes (positive, H·D and every weight size without overflow). */
attn_status attn_mha_config_check(const attn_mha_config *cfg);

typedef struct {
    float *w_q; /* (H*D, C)   */
    float *b_q; /* (H*D)      NULL without bias */
    float *w_k; /* (H*D, Ckv) */
    float *b_k; /* (H*D)      */
    float *w_v; /* (H*D, Ckv) */
    float *b_v; /* (H*D)      */
    float *w_o; /* (C, H*D)   */
    float *b_o; /* (C)        */
} attn_mha_weights; /* also the layout of the gradients */

/* Number of floats of all weights (and biases) of one layer. */
size_t attn_mha_num_params(const attn_mha_config *cfg);

/* Point w's fields into buf (attn_mha_num_params floats) in the order w_q, w_k, w_v, b_q, b_k, b_v,
 * w_o, b_o. With this layout, when d_kv == d_model, W_Q, W_K, W_V form one (3·H·D, C) matrix and
 * self-attention uses a single fused QKV projection. */
attn_status attn_mha_weights_view(const attn_mha_config *cfg, float *buf, attn_mha_weights *w);

/* The block layer's projections for these weights (q, k, v, o views; adjacent q|k|v fuse). */
attn_nn_attn attn_mha_as_attn(const attn_mha_config *cfg, const attn_mha_weights *w);

typedef struct {
    bool causal;           /* decoder self-attention: query i sees keys j <= i + causal_offset */
    int causal_offset;     /* 0 for plain self-attention; Tk − Tq when queries are the last Tq */
    const int32_t *kv_len; /* (B) key padding: keys t >= kv_len[b] are ignored; NULL = none */
} attn_mha_mask;

typedef struct attn_mha_state attn_mha_state;

/* Buffers for batches of up to B sequences of up to Tq queries and Tk keys. */
attn_status attn_mha_state_init(const attn_mha_config *cfg, int B, int Tq, int Tk,
                                attn_mha_state **out);
void attn_mha_state_free(attn_mha_state *st);

/* y (B, Tq, C) = W_O · attention(x W_Qᵀ, kv W_Kᵀ, kv W_Vᵀ) with biases.
 *   x  (B, Tq, C)
 *   kv (B, Tk, Ckv) the key/value source, or NULL for self-attention (then Tk must equal Tq and
 *      the keys and values come from x)
 *   mask may be NULL (no mask)
 *   probs (B, H, Tq, Tk) or NULL: the attention weights, on request
 * The state keeps what attn_mha_backward needs; x and kv must be unchanged until then. */
attn_status attn_mha_forward(const attn_mha_config *cfg, const attn_mha_weights *w,
                             attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                             const float *kv, const attn_mha_mask *mask, float *y, float *probs);

/* Gradients of the last attn_mha_forward on st, given dy (B, Tq, C):
 *   dx  (B, Tq, C)   overwritten (for self-attention it includes the key/value paths)
 *   dkv (B, Tk, Ckv) overwritten; must be NULL for self-attention, non-NULL for cross-attention
 *   grads: accumulated into (+=), in the same layout as w (NULL fields skipped when !bias). */
attn_status attn_mha_backward(const attn_mha_config *cfg, const attn_mha_weights *w,
                              attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                              const float *kv, const attn_mha_mask *mask, const float *dy,
                              float *dx, float *dkv, const attn_mha_weights *grads);

#ifdef __cplusplus
}
#endif
#endif

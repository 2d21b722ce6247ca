/* gpt_decode.c — GPT-2 inference with a KV cache (attn_gpt.h: attn_gpt_kv_*, attn_gpt_decode).
 *
 * The cache holds, per layer, the keys and values of every position so far for each of the B
 * sequences: k, v (L, B, max_T, C), heads interleaved along C as the attention kernel reads them,
 * and the keys again transposed, kt (L, B, C, ldkt): a decoding step's scores read them as they
 * are instead of transposing every cached key at every step (attn_nn_kv.kt; the same bits).
 * A call runs its new positions in chunks of at most CHUNK positions per sequence (one chunk for
 * any usual prompt) through the same block-layer sub-layers as training (gpt.c), in evaluation
 * mode and in place on the stream: the attention sub-layer appends the chunk's keys and values to
 * the cache and its queries attend over the cache (causal over everything cached); residual adds
 * are GEMMs with beta = 1 straight into the stream, and the MLP's bias and activation are fused
 * into the GEMM's epilogue: inference keeps no activations for a backward. For one new token per
 * sequence every GEMM has M = B rows, which attn_gemm runs as a weight-streaming small-M
 * product.
 * Each sequence keeps its own length (lens): attn_gpt_decode moves them together, while
 * attn_gpt_decode_seq runs one sequence alone (a server's new request: its prompt) and
 * attn_gpt_decode_ragged steps any subset of sequences by one token each in one pass, each row
 * at its own position (attn_nn_seqs.pos0s / slot: the attention sub-layer appends every row at
 * its sequence's position and attends per sequence), the products over all rows at once. */
#include "attn_gpt.h"

#include "../core/core-impl.h"
#include "gpt-impl.h"

#include <math.h>
#include <string.h>

/* Positions per sequence processed in one pass: bounds the scratch for long prompts. */
#define CHUNK 256

struct attn_gpt_kv {
    const attn_gpt_model *model;
    int B, max_T;
    int32_t *lens; /* (B) each sequence's cached positions */
    int rows;     /* rows of scratch: B·chunk (attn_gpt_kv_init), or max(B, seq_chunk) (slots) */
    int chunk;    /* positions per sequence per attn_gpt_decode pass: rows / B, at most CHUNK */
    int seq_chunk; /* positions per attn_gpt_decode_seq pass: min(max_T, CHUNK, rows) */
    int KD;       /* H_kv·D: a cached key's (or value's) floats */
    float *k, *v; /* (L, B, max_T, KD) */
    float *kt;    /* (L, B, KD, ldkt) the keys transposed for decoding steps (attn_nn_kv.kt), or
                     NULL with f16 */
    int ldkt;
    bool f16;     /* keys and values rounded to binary16 (attn_gpt_kv_params.f16) */
    uint16_t *kt16; /* (L, B, KD, ldkt) with f16: the transposed keys as binary16 */
    uint16_t *v16;  /* (L, B, max_T, KD) with f16: the values as binary16 */
    float *x;     /* (rows, C) the residual stream */
    float *a;     /* (rows, C) norm output */
    float *qkv;   /* (rows, (H + 2·H_kv)·D) */
    float *att;   /* (rows, H·D) */
    float *h;     /* the MLP's evaluation activations over the rows
                     (attn_nn_ffn_acts_floats: (rows, F), gated (rows, 3F)) */
    float *last;  /* (B, C) ln_f of each sequence's last position */
    int32_t *step_pos; /* (rows) attn_gpt_decode_batch: each row's position */
    int32_t *step_p0;  /* (B) each sequence's first position */
    int32_t *step_off; /* (B + 1) each sequence's first row */
    float *probs; /* (B, H, chunk, max_T) capture scratch, allocated on demand */
    attn_gpt_capture cap;
    attn_quant_act quant_act; /* activations of products on quantized weights (default F32) */
};

void attn_gpt_kv_free(attn_gpt_kv *kv) {
    if (!kv) return;
    attn_free(kv->k);
    attn_free(kv->kt);
    attn_free(kv->kt16);
    attn_free(kv->v16);
    attn_free(kv->v);
    attn_free(kv->x);
    attn_free(kv->a);
    attn_free(kv->qkv);
    attn_free(kv->att);
    attn_free(kv->h);
    attn_free(kv->last);
    attn_free(kv->lens);
    attn_free(kv->step_pos);
    attn_free(kv->step_p0);
    attn_free(kv->step_off);
    attn_free(kv->probs);
    attn_free(kv);
}

/* A cache of B sequences of max_T positions with scratch for `slots` ? max(B, min(max_T, CHUNK))
 * : B·min(max_T, CHUNK) rows. */
static attn_status kv_make(const attn_gpt_model *m, int B, int max_T, bool slots, bool f16,
                           attn_gpt_kv **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt kv: NULL argument");
    *out = NULL;
    const attn_gpt_config *c = &m->cfg;
    if (B < 1 || max_T < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt kv: B and max_T must be > 0 (got %d, %d)", B, max_T);
    if (max_T > c->n_positions)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt kv: max_T = %d exceeds n_positions %d",
                         max_T, c->n_positions);
    const int C = c->n_embd, F = attn_gpt_inner(c), L = c->n_layer, D = attn_gpt_head_dim(c);
    const int HD = c->n_head * D, KD = attn_gpt_kv_heads(c) * D, W = HD + 2 * KD;
    const int chunk = ATTN_MIN(max_T, CHUNK);
    const int ldkt = attn_nn_kv_ldkt(max_T);
    const double cache = (2.0 * max_T + ldkt) * L * B * (double)KD;
    const double rows = slots ? (double)ATTN_MAX(B, chunk) : (double)B * chunk;
    const double Fh = (attn_gpt_is_llama(c) ? 3.0 : 1.0) * F;
    const double scratch = rows * (3.0 * C + W + HD + Fh) + (double)B * C;
    if (cache + scratch > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) ||
        rows * ATTN_MAX((double)W, Fh) > INT32_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "gpt kv: B=%d max_T=%d needs %.3g floats of cache, too large", B, max_T,
                         cache + scratch);
    attn_gpt_kv *kv = attn_calloc(sizeof *kv);
    if (!kv) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt kv: out of memory");
    kv->model = m;
    kv->B = B, kv->max_T = max_T, kv->KD = KD;
    kv->rows = (int)rows;
    kv->chunk = ATTN_MAX(1, ATTN_MIN(chunk, kv->rows / B));
    kv->seq_chunk = ATTN_MIN(chunk, kv->rows);
    const size_t ncache = (size_t)L * B * max_T * KD, nr = (size_t)kv->rows;
    /* The transposed keys on transparent huge pages (advised before the memset touches them
     * all): a decoding step reads each sequence's keys as KD rows of K^T, ldkt floats apart, so
     * with 4 KB pages and a long max_T every row read is a page of its own (16 slots x 30 layers
     * of SmolLM2: ~92,000 pages a step, against ~3,000 entries of the L2 TLB). Not measurable
     * through this machine's noise (bench_ragged, 16 slots). With slots (a server's cache, made
     * once at its start, as llama.cpp clears its whole KV buffer) the values too: a step reads
     * each sequence's values as ctx rows of KD floats, 4 KB pages one after the other (16 slots
     * x 30 layers at ~100 positions: ~9,000 pages a step); on huge pages the P·V share of a
     * 16-slot step fell from 0.23-0.24 to 0.19-0.21 of the Q4_1 products' (perf, bench_ragged)
     * and a serving step 21.1 -> 19.6 ms (three alternations, wrk at 16 streams). Made lazily
     * on huge pages instead, each first touch would zero 2 MB in the middle of a request. k
     * (read only by prompt passes), and a single sequence's cache (attn generate), stay on 4 KB
     * pages, made resident only as positions are written. */
    const size_t nkt = (size_t)L * B * KD * ldkt;
    kv->k = attn_alloc(ncache * sizeof(float));
    kv->v = attn_alloc(ncache * sizeof(float));
    kv->ldkt = ldkt;
    kv->f16 = f16;
    bool cache_ok;
    if (!f16) {
        if (slots && kv->v) { /* a server's cache: the values on huge pages too, touched now */
            attn_advise_huge_pages(kv->v, ncache * sizeof(float));
            memset(kv->v, 0, ncache * sizeof(float));
        }
        kv->kt = attn_alloc(nkt * sizeof(float));
        if (kv->kt) {
            attn_advise_huge_pages(kv->kt, nkt * sizeof(float));
            memset(kv->kt, 0, nkt * sizeof(float));
        }
        cache_ok = kv->kt != NULL;
    } else { /* what decoding steps read: the binary16 copies, the same way */
        kv->kt16 = attn_alloc(nkt * sizeof(uint16_t));
        kv->v16 = attn_alloc(ncache * sizeof(uint16_t));
        if (kv->kt16) {
            attn_advise_huge_pages(kv->kt16, nkt * sizeof(uint16_t));
            memset(kv->kt16, 0, nkt * sizeof(uint16_t));
        }
        if (slots && kv->v16) {
            attn_advise_huge_pages(kv->v16, ncache * sizeof(uint16_t));
            memset(kv->v16, 0, ncache * sizeof(uint16_t));
        }
        cache_ok = kv->kt16 && kv->v16;
    }
    kv->x = attn_alloc(nr * C * sizeof(float));
    kv->a = attn_alloc(nr * C * sizeof(float));
    kv->qkv = attn_alloc(nr * W * sizeof(float));
    kv->att = attn_alloc(nr * HD * sizeof(float));
    kv->h = attn_alloc(attn_nn_ffn_acts_floats(&m->w.h[0].mlp, (int)nr, false) * sizeof(float));
    kv->last = attn_alloc((size_t)B * C * sizeof(float));
    kv->lens = attn_calloc((size_t)B * sizeof(int32_t));
    kv->step_pos = attn_alloc(nr * sizeof(int32_t));
    kv->step_p0 = attn_alloc((size_t)B * sizeof(int32_t));
    kv->step_off = attn_alloc((size_t)(B + 1) * sizeof(int32_t));
    if (!kv->k || !kv->v || !cache_ok || !kv->x || !kv->a || !kv->qkv || !kv->att || !kv->h || !kv->last ||
        !kv->lens || !kv->step_pos || !kv->step_p0 || !kv->step_off) {
        attn_gpt_kv_free(kv);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt kv: out of memory for B=%d max_T=%d", B,
                         max_T);
    }
    *out = kv;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_kv_init(const attn_gpt_model *m, int B, int max_T, attn_gpt_kv **out) {
    return kv_make(m, B, max_T, false, false, out);
}

attn_status attn_gpt_kv_init_slots(const attn_gpt_model *m, int n_slots, int max_T,
                                   attn_gpt_kv **out) {
    return kv_make(m, n_slots, max_T, true, false, out);
}

attn_gpt_kv_params attn_gpt_kv_default_params(void) {
    attn_gpt_kv_params p = {false, false};
    return p;
}

attn_status attn_gpt_kv_init_params(const attn_gpt_model *m, int B, int max_T,
                                    const attn_gpt_kv_params *p, attn_gpt_kv **out) {
    const attn_gpt_kv_params d = attn_gpt_kv_default_params();
    if (!p) p = &d;
    return kv_make(m, B, max_T, p->slots, p->f16, out);
}

bool attn_gpt_kv_f16(const attn_gpt_kv *kv) { return kv && kv->f16; }

void attn_gpt_kv_reset(attn_gpt_kv *kv) {
    if (kv) memset(kv->lens, 0, (size_t)kv->B * sizeof(int32_t));
}

/* The shortest and longest sequence. */
static void len_range(const attn_gpt_kv *kv, int *lo, int *hi) {
    *lo = *hi = kv->lens[0];
    for (int b = 1; b < kv->B; b++) {
        *lo = ATTN_MIN(*lo, (int)kv->lens[b]);
        *hi = ATTN_MAX(*hi, (int)kv->lens[b]);
    }
}

attn_status attn_gpt_kv_truncate(attn_gpt_kv *kv, int len) {
    if (!kv) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt kv: NULL cache");
    int lo, hi;
    len_range(kv, &lo, &hi);
    if (len < 0 || len > lo)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt kv: cannot truncate to %d positions (the cache holds %d)", len, lo);
    for (int b = 0; b < kv->B; b++) kv->lens[b] = len;
    return ATTN_STATUS_OK;
}

int attn_gpt_kv_len(const attn_gpt_kv *kv) {
    if (!kv) return 0;
    int lo, hi;
    len_range(kv, &lo, &hi);
    return hi;
}

int attn_gpt_kv_seq_len(const attn_gpt_kv *kv, int b) {
    return kv && b >= 0 && b < kv->B ? kv->lens[b] : 0;
}

attn_status attn_gpt_kv_seq_truncate(attn_gpt_kv *kv, int b, int len) {
    if (!kv) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt kv: NULL cache");
    if (b < 0 || b >= kv->B)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt kv: sequence %d is outside the cache's [0, %d)", b, kv->B);
    if (len < 0 || len > kv->lens[b])
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt kv: cannot truncate sequence %d to %d positions (it holds %d)", b,
                         len, (int)kv->lens[b]);
    kv->lens[b] = len;
    return ATTN_STATUS_OK;
}
attn_status attn_gpt_kv_seq_copy(attn_gpt_kv *kv, int dst, int src, int n) {
    if (!kv) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt kv: NULL cache");
    if (dst < 0 || dst >= kv->B || src < 0 || src >= kv->B || dst == src)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt kv: cannot copy sequence %d into %d (two sequences of [0, %d))", src,
                         dst, kv->B);
    const int p = kv->lens[dst];
    if (n < p || n > kv->lens[src])
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt kv: cannot copy positions [%d, %d) of sequence %d (it holds %d)", p,
                         n, src, (int)kv->lens[src]);
    const size_t L = (size_t)kv->model->cfg.n_layer, B = (size_t)kv->B, T = (size_t)kv->max_T;
    const size_t KD = (size_t)kv->KD, c = (size_t)(n - p), ld = (size_t)kv->ldkt;
    for (size_t l = 0; l < L && c; l++) {
        /* k, v (and v16): (L, B, max_T, KD), positions contiguous */
        const size_t d0 = ((l * B + (size_t)dst) * T + (size_t)p) * KD;
        const size_t s0 = ((l * B + (size_t)src) * T + (size_t)p) * KD;
        memcpy(kv->k + d0, kv->k + s0, c * KD * sizeof *kv->k);
        memcpy(kv->v + d0, kv->v + s0, c * KD * sizeof *kv->v);
        if (kv->v16) memcpy(kv->v16 + d0, kv->v16 + s0, c * KD * sizeof *kv->v16);
        /* kt (or kt16): (L, B, KD, ldkt), a row per key dimension */
        for (size_t d = 0; d < KD; d++) {
            const size_t dt = ((l * B + (size_t)dst) * KD + d) * ld + (size_t)p;
            const size_t st = ((l * B + (size_t)src) * KD + d) * ld + (size_t)p;
            if (kv->kt) memcpy(kv->kt + dt, kv->kt + st, c * sizeof *kv->kt);
            if (kv->kt16) memcpy(kv->kt16 + dt, kv->kt16 + st, c * sizeof *kv->kt16);
        }
    }
    kv->lens[dst] = n;
    return ATTN_STATUS_OK;
}

int attn_gpt_kv_batch(const attn_gpt_kv *kv) { return kv ? kv->B : 0; }
int attn_gpt_kv_max_len(const attn_gpt_kv *kv) { return kv ? kv->max_T : 0; }

void attn_gpt_kv_set_quant_act(attn_gpt_kv *kv, attn_quant_act act) {
    if (kv) kv->quant_act = act == ATTN_QUANT_ACT_Q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
}

attn_quant_act attn_gpt_kv_quant_act(const attn_gpt_kv *kv) {
    return kv ? kv->quant_act : ATTN_QUANT_ACT_F32;
}

void attn_gpt_kv_set_capture(attn_gpt_kv *kv, const attn_gpt_capture *cap) {
    if (!kv) return;
    if (cap)
        kv->cap = *cap;
    else
        memset(&kv->cap, 0, sizeof kv->cap);
}

/* ---- packed weights (attn_gpt_pack_weights) ------------------------------------------------- */

void attn_gpt_unpack_weights(attn_gpt_model *m) {
    if (!m || !m->packed) return;
    struct attn_gpt_packed *p = m->packed;
    for (int l = 0; p->layer && l < p->L; l++) {
        gpt_packed_layer *P = &p->layer[l];
        attn_gemm_packed_b_free(&P->p_qkv);
        attn_gemm_packed_b_free(&P->p_o);
        attn_gemm_packed_b_free(&P->p_up);
        attn_gemm_packed_b_free(&P->p_down);
    }
    attn_free(p->layer);
    attn_free(p);
    m->packed = NULL;
}

/* *L's panels into *P, and L pointing at them. */
static attn_status pack_map(attn_nn_linear *L, attn_gemm_packed_b *P) {
    ATTN_TRY(attn_nn_linear_pack(L, ATTN_PRECISION_F32, P));
    L->packed = P;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_pack_weights(attn_gpt_model *m) {
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt pack: NULL model");
    attn_gpt_unpack_weights(m);
    const int L = m->cfg.n_layer;
    const bool llama = attn_gpt_is_llama(&m->cfg);
    struct attn_gpt_packed *p = attn_calloc(sizeof *p);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt pack: out of memory");
    p->layer = attn_calloc((size_t)L * sizeof *p->layer);
    p->L = L;
    m->packed = p; /* freed by attn_gpt_unpack_weights below on failure */
    attn_status s = p->layer ? ATTN_STATUS_OK
                             : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt pack: out of memory");
    for (int l = 0; l < L && !s; l++) {
        const attn_gpt_block *W = &m->w.h[l];
        gpt_packed_layer *P = &p->layer[l];
        P->o = W->attn.o, P->up = W->mlp.up, P->down = W->mlp.down;
        if (!llama)
            P->qkv = W->attn.qkv;
        else if (!attn_nn_linear_fuse(&W->attn.q, &W->attn.k, &W->attn.v, &P->qkv))
            P->qkv.w = NULL; /* not adjacent (never with attn's layout): left unpacked */
        if (llama && !attn_nn_linear_fuse(&W->mlp.gate, &W->mlp.up, NULL, &P->up))
            P->up.w = NULL;
        /* quantized maps (a GGUF model's) are used as they are: only float ones are packed */
        if (P->qkv.w) s = pack_map(&P->qkv, &P->p_qkv);
        if (!s && P->o.w) s = pack_map(&P->o, &P->p_o);
        if (!s && P->up.w) s = pack_map(&P->up, &P->p_up);
        if (!s && P->down.w) s = pack_map(&P->down, &P->p_down);
    }
    if (s) attn_gpt_unpack_weights(m);
    return s;
}

void gpt_use_packed(const attn_gpt_model *m, int l, int M, attn_nn_sublayer S[2]) {
    const attn_quant_packed *F = m->qkv_qp ? &m->qkv_qp[l] : NULL;
    attn_nn_attn *A = &S[0].attn;
    if (F && F->data && !A->qkv.w && !A->qkv.qw &&
        ((!A->q.b && !A->k.b && !A->v.b) ||
         (A->q.b && A->k.b == A->q.b + A->q.out && A->v.b == A->k.b + A->k.out))) {
        /* a GGUF Llama's fused q, k, v (the biases, when there are any, adjacent as they are) */
        attn_nn_linear f = attn_nn_linear_make_quant(F->type, NULL, A->q.b, F->K, F->N);
        f.qpacked = F;
        A->qkv = f;
    }
    if (!m->packed || M <= GPT_STREAM_ROWS) return;
    const gpt_packed_layer *P = &m->packed->layer[l];
    if (P->qkv.w) S[0].attn.qkv = P->qkv; /* Llama: the fused map replaces q, k, v */
    if (P->o.w) S[0].attn.o = P->o;
    if (P->up.w && S[1].ffn.kind == ATTN_FFN_GATED)
        S[1].ffn.pair_packed = &P->p_up;
    else if (P->up.w)
        S[1].ffn.up = P->up;
    if (P->down.w) S[1].ffn.down = P->down;
}

/* Copy rows [t0, t0 + tq) of each sequence's (tq rows in rows_src, C) into the capture's
 * (B, n_new, C) slab at entry `entry`. */
static void capture_hidden(attn_gpt_kv *kv, int entry, int n_new, int t0, int tq,
                           const float *src) {
    const int B = kv->B, C = kv->model->cfg.n_embd;
    float *slab = kv->cap.hidden + (size_t)entry * B * n_new * C;
    for (int b = 0; b < B; b++)
        memcpy(slab + ((size_t)b * n_new + t0) * C, src + (size_t)b * tq * C,
               (size_t)tq * C * sizeof(float));
}

/* One pass over the rows of s (the embeddings already in kv->x): the cache's sequences
 * b0 .. b0 + cacheB − 1 (s->slot indexes them when given), the capture (for attn_gpt_decode's
 * passes: rows [t0, t0 + tq) of n_new) when set. Leaves the final stream in kv->x. */
static attn_status run_layers(const attn_gpt_model *m, attn_gpt_kv *kv, const attn_nn_seqs *s,
                              int b0, int cacheB, int n_new, int t0, bool few) {
    const attn_gpt_config *c = &m->cfg;
    const int L = c->n_layer, H = c->n_head, B = s->B, tq = s->Tq;
    const int M = s->off ? s->off[B] : B * tq, pos0 = s->pos0, Tk = pos0 + tq;
    attn_nn_run run = attn_nn_default_run();
    run.quant_act = kv->quant_act;
    /* few: a ragged step's rows (one per sequence): decoding-sized products, chunked */
    run.few_rows = few;
    for (int l = 0; l < L; l++) {
        attn_nn_sublayer S[2];
        gpt_sublayers(m, &m->w.h[l], l, 0.0f, S);
        gpt_use_packed(m, l, M, S);
        if (kv->cap.hidden) capture_hidden(kv, l, n_new, t0, tq, kv->x);
        const size_t layer = ((size_t)l * kv->B + b0) * kv->max_T * kv->KD;
        const size_t tlayer = ((size_t)l * kv->B + b0) * kv->KD * kv->ldkt;
        const attn_nn_kv cache = {kv->k + layer,
                                  kv->v + layer,
                                  cacheB,
                                  kv->max_T,
                                  0,
                                  kv->kt ? kv->kt + tlayer : NULL,
                                  kv->ldkt,
                                  kv->f16,
                                  kv->kt16 ? kv->kt16 + tlayer : NULL,
                                  kv->v16 ? kv->v16 + layer : NULL};
        attn_nn_sub_acts A;
        memset(&A, 0, sizeof A);
        A.ln = kv->a, A.res = kv->x;
        A.attn.proj = kv->qkv, A.attn.ctx = kv->att;
        float *probs_out = kv->cap.attn_probs ? kv->cap.attn_probs[l] : NULL;
        ATTN_TRY(attn_nn_sub_forward(&run, &S[0], s, M, attn_nn_rows_plain(tq), kv->x, NULL,
                                     &cache, &A, probs_out ? kv->probs : NULL, NULL));
        if (probs_out) {
            /* (B, H, tq, Tk) of this chunk into (B, H, n_new, Tkf), Tkf = the cache length after
             * the whole call; keys past Tk are masked for these queries: 0. */
            const int Tkf = pos0 - t0 + n_new;
            for (int b = 0; b < B; b++)
                for (int hh = 0; hh < H; hh++)
                    for (int t = 0; t < tq; t++) {
                        float *dst = probs_out + (((size_t)b * H + hh) * n_new + t0 + t) * Tkf;
                        const float *src = kv->probs + (((size_t)b * H + hh) * tq + t) * Tk;
                        memcpy(dst, src, (size_t)Tk * sizeof(float));
                        memset(dst + Tk, 0, (size_t)(Tkf - Tk) * sizeof(float));
                    }
        }
        attn_nn_ffn_acts_view(&S[1].ffn, M, false, kv->h, &A.ffn);
        ATTN_TRY(attn_nn_sub_forward(&run, &S[1], s, M, attn_nn_rows_plain(tq), kv->x, NULL, NULL,
                                     &A, NULL, NULL));
    }
    return ATTN_STATUS_OK;
}

static attn_status check_model(const attn_gpt_model *m, const attn_gpt_kv *kv, const void *ids,
                               const char *what) {
    if (!m || !kv || !ids) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL argument", what);
    if (kv->model != m)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: the cache was made for another model",
                         what);
    return ATTN_STATUS_OK;
}

/* attn_gpt_decode over the cache's sequences b0 .. b0 + B − 1, which all hold kv->lens[b0]
 * positions, in passes of `chunk` positions per sequence. */
static attn_status decode_run(const attn_gpt_model *m, attn_gpt_kv *kv, int B, int b0, int chunk,
                              int n_new, const int32_t *ids, float *logits, bool all) {
    const attn_gpt_config *c = &m->cfg;
    const int C = c->n_embd, V = c->vocab_size, L = c->n_layer, H = c->n_head;
    attn_nn_run run = attn_nn_default_run();
    run.quant_act = kv->quant_act;
    /* With int8 activations every product in decoding-sized chunks of int8 rows, prompts
     * included (llama.cpp's arithmetic): a row's numbers do not depend on how many rows its
     * pass has (tests/test_quant.c rows_alone), so a server that feeds prompts in its batched
     * steps, or takes a prefix from its cache, gives this call's bits (tests/test_ragged.c). */
    run.few_rows = kv->quant_act == ATTN_QUANT_ACT_Q8;
    const attn_nn_linear head = gpt_head(m, &m->w);
    if (kv->cap.attn_probs && !kv->probs) {
        kv->probs = attn_alloc((size_t)B * H * kv->chunk * kv->max_T * sizeof(float));
        if (!kv->probs) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt decode: out of memory");
    }
    const int start = kv->lens[b0];
    int32_t *chunk_ids = NULL;
    attn_status s = ATTN_STATUS_OK;
    for (int t0 = 0; t0 < n_new; t0 += chunk) {
        const int tq = ATTN_MIN(chunk, n_new - t0);
        const int32_t *cid = ids;
        if (tq != n_new) {
            /* The chunk's ids (B, tq) gathered from ids (B, n_new). */
            if (!chunk_ids) chunk_ids = attn_alloc((size_t)B * chunk * sizeof(int32_t));
            if (!chunk_ids) {
                s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt decode: out of memory");
                break;
            }
            for (int b = 0; b < B; b++)
                memcpy(chunk_ids + (size_t)b * tq, ids + (size_t)b * n_new + t0,
                       (size_t)tq * sizeof(int32_t));
            cid = chunk_ids;
        }
        const int pos0 = start + t0;
        attn_nn_seqs sq = attn_nn_seqs_dense(B, tq, tq);
        sq.pos0 = pos0;
        gpt_embed(m, B, tq, pos0, cid, kv->x);
        s = run_layers(m, kv, &sq, b0, B, n_new, t0, run.few_rows);
        if (s) break;
        for (int b = b0; b < b0 + B; b++) kv->lens[b] = pos0 + tq;
        const int M = B * tq;
        const bool last_chunk = t0 + tq == n_new;
        if (all || kv->cap.hidden) {
            /* ln_f of every row of the chunk (into kv->a), then all logits of the chunk. */
            s = attn_nn_norm_forward(&m->w.ln_f, M, kv->x, kv->a, NULL, NULL);
            if (s) break;
            if (kv->cap.hidden) capture_hidden(kv, L, n_new, t0, tq, kv->a);
            if (all && logits) {
                if (tq == n_new) /* one chunk: the rows (B, n_new) are contiguous */
                    s = attn_nn_linear_forward(&run, &head, M, kv->a, C, 0.0f, logits, V,
                                               ATTN_ACT_NONE);
                for (int b = 0; b < B && !s && tq != n_new; b++)
                    s = attn_nn_linear_forward(&run, &head, tq, kv->a + (size_t)b * tq * C, C,
                                               0.0f, logits + ((size_t)b * n_new + t0) * V, V,
                                               ATTN_ACT_NONE);
                if (s) break;
            }
        }
        if (!all && logits && last_chunk) {
            /* Only each sequence's last position: B rows of ln_f and one (B, V) product. */
            for (int b = 0; b < B; b++)
                memcpy(kv->last + (size_t)b * C, kv->x + ((size_t)b * tq + tq - 1) * C,
                       C * sizeof(float));
            s = attn_nn_norm_forward(&m->w.ln_f, B, kv->last, kv->a, NULL, NULL);
            if (!s)
                s = attn_nn_linear_forward(&run, &head, B, kv->a, C, 0.0f, logits, V,
                                           ATTN_ACT_NONE);
            if (s) break;
        }
    }
    attn_free(chunk_ids);
    if (s) /* nothing of a failed call stays in the cache */
        for (int b = b0; b < b0 + B; b++) kv->lens[b] = start;
    return s;
}

attn_status attn_gpt_decode(const attn_gpt_model *m, attn_gpt_kv *kv, int B, int n_new,
                            const int32_t *ids, float *logits, bool all) {
    ATTN_TRY(check_model(m, kv, ids, "gpt decode"));
    if (B != kv->B)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt decode: B = %d but the cache holds %d sequences", B, kv->B);
    if (n_new < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt decode: n_new must be >= 1 (got %d)",
                         n_new);
    int lo, hi;
    len_range(kv, &lo, &hi);
    if (lo != hi)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt decode: the cache's sequences have different lengths (%d to %d): "
                         "use attn_gpt_decode_seq / attn_gpt_decode_ragged",
                         lo, hi);
    if (n_new > kv->max_T - lo)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt decode: %d new positions after %d cached exceed the cache's %d "
                         "positions",
                         n_new, lo, kv->max_T);
    ATTN_TRY(gpt_check_ids("gpt decode", &m->cfg, B, n_new, ids));
    return decode_run(m, kv, B, 0, kv->chunk, n_new, ids, logits, all);
}

attn_status attn_gpt_decode_seq(const attn_gpt_model *m, attn_gpt_kv *kv, int b, int n_new,
                                 const int32_t *ids, float *logits, bool all) {
    ATTN_TRY(check_model(m, kv, ids, "gpt decode_seq"));
    if (b < 0 || b >= kv->B)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt decode_seq: sequence %d is outside the cache's [0, %d)", b, kv->B);
    if (kv->cap.hidden || kv->cap.attn_probs)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "gpt decode_seq: capture is for attn_gpt_decode");
    if (n_new < 1 || n_new > kv->max_T - kv->lens[b])
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt decode_seq: %d new positions after sequence %d's %d cached: must "
                         "be >= 1 and fit the cache's %d positions",
                         n_new, b, (int)kv->lens[b], kv->max_T);
    ATTN_TRY(gpt_check_ids("gpt decode_seq", &m->cfg, 1, n_new, ids));
    return decode_run(m, kv, 1, b, kv->seq_chunk, n_new, ids, logits, all);
}

attn_status attn_gpt_decode_batch(const attn_gpt_model *m, attn_gpt_kv *kv, int n,
                                  const int32_t *seqs, const int32_t *counts, const int32_t *ids,
                                  float *logits) {
    ATTN_TRY(check_model(m, kv, ids, "gpt decode_batch"));
    if (kv->cap.hidden || kv->cap.attn_probs)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "gpt decode_batch: capture is for attn_gpt_decode");
    if (n < 1 || n > kv->B)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt decode_batch: n = %d sequences, the cache holds %d", n, kv->B);
    long rows = 0;
    int most = 1;
    kv->step_off[0] = 0;
    for (int i = 0; i < n; i++) {
        const int b = seqs ? seqs[i] : i, c = counts ? counts[i] : 1;
        if (b < 0 || b >= kv->B)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gpt decode_batch: sequence %d is outside the cache's [0, %d)", b,
                             kv->B);
        for (int j = 0; seqs && j < i; j++)
            if (seqs[j] == b)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "gpt decode_batch: sequence %d given twice", b);
        if (c < 1)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gpt decode_batch: sequence %d gets %d new positions (must be >= 1)",
                             b, c);
        if (c > kv->max_T - kv->lens[b])
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gpt decode_batch: sequence %d's cache is full (%d positions cached, "
                             "%d new, %d in all)",
                             b, (int)kv->lens[b], c, kv->max_T);
        rows += c;
        if (rows > kv->rows)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gpt decode_batch: more than the cache's %d rows in one pass",
                             kv->rows);
        most = ATTN_MAX(most, c);
        kv->step_p0[i] = kv->lens[b];
        kv->step_off[i + 1] = (int32_t)rows;
        for (int t = 0; t < c; t++) kv->step_pos[kv->step_off[i] + t] = kv->lens[b] + t;
    }
    const attn_gpt_config *c = &m->cfg;
    ATTN_TRY(gpt_check_ids("gpt decode_batch", c, 1, (int)rows, ids));
    const int C = c->n_embd, V = c->vocab_size;
    attn_nn_seqs sq = attn_nn_seqs_dense(n, most, most);
    sq.pos0s = kv->step_p0;
    sq.slot = seqs;
    if (counts) sq.off = kv->step_off; /* else one row each: the padded layout */
    gpt_embed_pos(m, (int)rows, kv->step_pos, ids, kv->x);
    /* no slot map: the first n */
    ATTN_TRY(run_layers(m, kv, &sq, 0, seqs ? kv->B : n, 1, 0, true));
    if (logits) {
        attn_nn_run run = attn_nn_default_run();
        run.quant_act = kv->quant_act;
        run.few_rows = true;
        const attn_nn_linear head = gpt_head(m, &m->w);
        const float *last = kv->x;
        if (counts) { /* each sequence's last row */
            for (int i = 0; i < n; i++)
                memcpy(kv->last + (size_t)i * C, kv->x + (size_t)(kv->step_off[i + 1] - 1) * C,
                       C * sizeof(float));
            last = kv->last;
        }
        ATTN_TRY(attn_nn_norm_forward(&m->w.ln_f, n, last, kv->a, NULL, NULL));
        ATTN_TRY(attn_nn_linear_forward(&run, &head, n, kv->a, C, 0.0f, logits, V,
                                        ATTN_ACT_NONE));
    }
    for (int i = 0; i < n; i++) kv->lens[seqs ? seqs[i] : i] += counts ? counts[i] : 1;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_decode_ragged(const attn_gpt_model *m, attn_gpt_kv *kv, int n,
                                   const int32_t *seqs, const int32_t *ids, float *logits) {
    return attn_gpt_decode_batch(m, kv, n, seqs, NULL, ids, logits);
}

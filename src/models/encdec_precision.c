/* encdec_precision.c — an encoder–decoder's inference precision (attn_models.h:
 * attn_encdec_set_precision): float32, bfloat16 products, or int8 weights (CTranslate2's one
 * scale per row, or GGUF's Q8_0).
 *
 * INT8 and Q8_0 compose what exists: attn_quant_pack_i8 packs each linear map's weight with one
 * scale per row (INT8); attn_quant_quantize writes it as Q8_0 rows and attn_quant_pack repacks
 * them in the x8 layout (Q8_0). The views of m->w then carry the result (attn_nn_linear.qpacked,
 * and .qw for Q8_0), so every forward of the block layer (attn_nn_linear_forward)
 * runs attn_quant_gemm_packed on them without any change to the model's code. q|k|v (and the
 * cross-attention's k|v) are adjacent in the parameter buffer, so each is quantized as one fused
 * matrix and runs as one product, as the float32 model fuses them. */
#include "attn_models.h"

#include "attn_quant.h"
#include "encdec-impl.h"

#include <string.h>

const char *attn_encdec_precision_name(attn_encdec_precision p) {
    switch (p) {
    case ATTN_ENCDEC_PRECISION_F32: return "f32";
    case ATTN_ENCDEC_PRECISION_BF16: return "bf16";
    case ATTN_ENCDEC_PRECISION_INT8: return "int8";
    case ATTN_ENCDEC_PRECISION_Q8_0: return "q8_0";
    }
    return "?";
}

attn_status attn_encdec_precision_parse(const char *name, attn_encdec_precision *out) {
    if (!name || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "precision: NULL argument");
    static const struct {
        const char *name;
        attn_encdec_precision p;
    } names[] = {{"f32", ATTN_ENCDEC_PRECISION_F32},   {"fp32", ATTN_ENCDEC_PRECISION_F32},
                 {"float32", ATTN_ENCDEC_PRECISION_F32}, {"bf16", ATTN_ENCDEC_PRECISION_BF16},
                 {"bfloat16", ATTN_ENCDEC_PRECISION_BF16}, {"int8", ATTN_ENCDEC_PRECISION_INT8},
                 {"q8_0", ATTN_ENCDEC_PRECISION_Q8_0}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name)) {
            *out = names[i].p;
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "unknown precision '%s' (expected f32, bf16, int8 or q8_0)", name);
}

void encdec_quant_free(attn_encdec_quant *q) {
    if (!q) return;
    for (int i = 0; i < q->n; i++) {
        attn_free(q->rows[i]);
        attn_quant_packed_free(&q->packs[i]);
    }
    attn_free(q->rows);
    attn_free(q->packs);
    attn_free(q);
}

attn_nn_run encdec_run(const attn_encdec_model *m) {
    attn_nn_run r = attn_nn_default_run();
    if (m->precision == ATTN_ENCDEC_PRECISION_BF16) r.precision = ATTN_PRECISION_BF16;
    if (m->quant) r.quant_act = m->quant_act;
    return r;
}

size_t attn_encdec_quant_bytes(const attn_encdec_model *m) {
    return m && m->quant ? m->quant->bytes : 0;
}

/* L (a dense OUT_IN float map) on int8 weights: I8 (one scale per row) or Q8_0 (rows quantized,
 * then repacked); L's qtype, qpacked (and for Q8_0 qw) set. A map whose input width is not a
 * multiple of the type's block (4 for I8: the VNNI step; 32 for Q8_0) stays float32. */
static attn_status quantize_map(attn_encdec_quant *q, attn_nn_linear *L) {
    const attn_qtype t = q->qtype;
    if (L->in % (t == ATTN_QTYPE_I8 ? 4 : attn_quant_block_elems(t)) != 0) return ATTN_STATUS_OK;
    if (!L->w || L->layout != ATTN_NN_OUT_IN || (L->ldw && L->ldw != L->in) || q->n >= q->cap)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec int8: not a dense (out, in) map");
    attn_quant_packed *P = &q->packs[q->n];
    if (t == ATTN_QTYPE_I8) {
        ATTN_TRY(attn_quant_pack_i8(L->out, L->in, L->w, P));
        q->n++; /* freed with q from here on */
        q->bytes += P->bytes + ((size_t)L->out + 15) / 16 * 16 * (sizeof(float) + sizeof(int32_t));
        L->qtype = t, L->qw = NULL, L->qpacked = P;
        return ATTN_STATUS_OK;
    }
    size_t rb;
    ATTN_TRY(attn_quant_row_bytes(t, L->in, &rb));
    void *rows = attn_alloc(rb * (size_t)L->out);
    if (!rows)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec int8: out of memory for (%d, %d)",
                         L->out, L->in);
    q->rows[q->n++] = rows; /* freed with q from here on */
    ATTN_TRY(attn_quant_quantize(t, (int64_t)L->out * L->in, L->w, rows));
    ATTN_TRY(attn_quant_pack(t, L->out, L->in, rows, P));
    ATTN_TRY(attn_quant_pack_sums(P)); /* beam steps: many-row products on it every step */
    q->bytes += rb * (size_t)L->out + P->bytes + (size_t)(L->out / 8) * (size_t)(L->in / 32) * 32;
    L->qtype = t, L->qw = rows, L->qpacked = P;
    return ATTN_STATUS_OK;
}

/* The map of rows adjacent views starting at first (q|k|v: 3, k|v: 2), quantized. */
static attn_status quantize_fused(attn_encdec_quant *q, const attn_nn_linear *first, int rows,
                                  attn_nn_linear *out) {
    *out = attn_nn_linear_make(first->w, first->b, first->in, rows * first->out, ATTN_NN_OUT_IN);
    return quantize_map(q, out);
}

static attn_status quantize_model(attn_encdec_model *m, attn_encdec_quant *q) {
    const attn_encdec_config *c = &m->cfg;
    for (int l = 0; l < c->n_enc_layers; l++) {
        attn_encdec_enc_layer *Y = &m->w.enc[l];
        ATTN_TRY(quantize_fused(q, &Y->self_attn.q, 3, &Y->self_attn.qkv));
        ATTN_TRY(quantize_map(q, &Y->self_attn.o));
        ATTN_TRY(quantize_map(q, &Y->ffn.up));
        ATTN_TRY(quantize_map(q, &Y->ffn.down));
    }
    for (int l = 0; l < c->n_dec_layers; l++) {
        attn_encdec_dec_layer *Y = &m->w.dec[l];
        ATTN_TRY(quantize_fused(q, &Y->self_attn.q, 3, &Y->self_attn.qkv));
        ATTN_TRY(quantize_map(q, &Y->self_attn.o));
        ATTN_TRY(quantize_map(q, &Y->cross_attn.q));
        ATTN_TRY(quantize_fused(q, &Y->cross_attn.k, 2, &Y->cross_attn.kv));
        ATTN_TRY(quantize_map(q, &Y->cross_attn.o));
        ATTN_TRY(quantize_map(q, &Y->ffn.up));
        ATTN_TRY(quantize_map(q, &Y->ffn.down));
    }
    q->out = attn_nn_linear_make(m->w.out_w, m->w.out_b, c->d_model, c->tgt_vocab,
                                 ATTN_NN_OUT_IN);
    return quantize_map(q, &q->out);
}

attn_status attn_encdec_set_precision(attn_encdec_model *m, attn_encdec_precision p,
                                      attn_quant_act act) {
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec precision: NULL model");
    if (p != ATTN_ENCDEC_PRECISION_F32 && p != ATTN_ENCDEC_PRECISION_BF16 &&
        p != ATTN_ENCDEC_PRECISION_INT8 && p != ATTN_ENCDEC_PRECISION_Q8_0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec precision: unknown precision %d",
                         (int)p);
    if (act != ATTN_QUANT_ACT_F32 && act != ATTN_QUANT_ACT_Q8 && act != ATTN_QUANT_ACT_Q8_ALL)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec precision: unknown activation mode %d", (int)act);
    if (p == ATTN_ENCDEC_PRECISION_BF16)
        ATTN_TRY(attn_precision_check(ATTN_PRECISION_BF16, "encdec"));
    /* Back to float32 views first: a failure below leaves the model in F32. */
    encdec_quant_free(m->quant);
    m->quant = NULL;
    encdec_layout_weights(m);
    m->precision = ATTN_ENCDEC_PRECISION_F32;
    m->quant_act = ATTN_QUANT_ACT_F32;
    if (p == ATTN_ENCDEC_PRECISION_INT8 || p == ATTN_ENCDEC_PRECISION_Q8_0) {
        const attn_encdec_config *c = &m->cfg;
        attn_encdec_quant *q = attn_calloc(sizeof *q);
        if (q) {
            q->qtype = p == ATTN_ENCDEC_PRECISION_INT8 ? ATTN_QTYPE_I8 : ATTN_QTYPE_Q8_0;
            q->cap = 4 * c->n_enc_layers + 7 * c->n_dec_layers + 1;
            q->rows = attn_calloc((size_t)q->cap * sizeof *q->rows);
            q->packs = attn_calloc((size_t)q->cap * sizeof *q->packs);
        }
        if (!q || !q->rows || !q->packs) {
            encdec_quant_free(q);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec int8: out of memory");
        }
        attn_status s = quantize_model(m, q);
        if (s) {
            encdec_quant_free(q);
            encdec_layout_weights(m);
            return s;
        }
        m->quant = q;
        m->quant_act = act;
    }
    m->precision = p;
    return ATTN_STATUS_OK;
}

/* ffn.c — the position-wise feed-forward block (attn_nn.h): plain down(act(up(x))) and gated
 * down(act(gate(x)) ⊙ up(x)), forward and backward.
 *
 * Plain: when the caller keeps the pre-activation (acts.u, training) and the activation's
 * derivative needs it (GELU, SiLU), u = up(x) is kept and h = act(u) computed separately;
 * otherwise the bias and activation are fused into the GEMM's epilogue (ReLU's derivative is
 * recovered from h: h > 0 iff u > 0). Gated: gate(x) | up(x) is one (M, 2F) buffer, one GEMM when
 * the two weights are adjacent rows of one (2F, C) matrix, then h = act(g) ⊙ u. */
#include "nn-impl.h"

#include <string.h>

static bool needs_preact(attn_act a) { return a != ATTN_ACT_RELU && a != ATTN_ACT_NONE; }

size_t attn_nn_ffn_acts_floats(const attn_nn_ffn *f, int M, bool training) {
    const size_t MF = (size_t)M * f->up.out;
    if (f->kind == ATTN_FFN_GATED) return 3 * MF;
    return MF * (training && needs_preact(f->act) ? 2 : 1);
}

void attn_nn_ffn_acts_view(const attn_nn_ffn *f, int M, bool training, float *buf,
                           attn_nn_ffn_acts *a) {
    const size_t MF = (size_t)M * f->up.out;
    memset(a, 0, sizeof *a);
    if (f->kind == ATTN_FFN_GATED) {
        a->g = buf;
        a->h = buf + 2 * MF;
        return;
    }
    a->h = buf;
    if (training && needs_preact(f->act)) a->u = buf + MF;
}

size_t attn_nn_ffn_work_floats(const attn_nn_ffn *f, int M) {
    return (size_t)M * f->up.out * (f->kind == ATTN_FFN_GATED ? 3 : 1);
}

/* The gate|up pair as one (2F, C) map when the two are adjacent OUT_IN weights. */
static bool fused_pair(const attn_nn_linear *gate, const attn_nn_linear *up, attn_nn_linear *out) {
    /* quantized (or missing) weights are never fused: attn_nn_linear_fuse needs float ones */
    return gate->out == up->out && attn_nn_linear_fuse(gate, up, NULL, out);
}

static attn_status check(const attn_nn_ffn *f, const char *what) {
    if (!f) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL block", what);
    const int C = f->up.in, F = f->up.out;
    if (f->down.in != F || f->down.out != C)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "%s: down is (%d -> %d), expected (%d -> %d)", what, f->down.in,
                         f->down.out, F, C);
    if (f->kind == ATTN_FFN_GATED && (f->gate.in != C || f->gate.out != F || !nn_has_weight(&f->gate)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: gated FFN needs gate (%d -> %d)", what,
                         C, F);
    if (f->kind != ATTN_FFN_PLAIN && f->kind != ATTN_FFN_GATED)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: unknown FFN kind %d", what,
                         (int)f->kind);
    return ATTN_STATUS_OK;
}

attn_status attn_nn_ffn_forward(const attn_nn_run *run, const attn_nn_ffn *f, int M,
                                const float *x, attn_nn_ffn_acts *a, float beta, float *y) {
    ATTN_TRY(check(f, "ffn"));
    if (!a || !a->h) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "ffn: no activation buffers");
    const int C = f->up.in, F = f->up.out;
    if (f->kind == ATTN_FFN_GATED) {
        if (!a->g) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "ffn: gated needs acts.g");
        attn_nn_linear pair;
        if (fused_pair(&f->gate, &f->up, &pair)) {
            pair.packed = f->pair_packed;
            ATTN_TRY(attn_nn_linear_forward(run, &pair, M, x, C, 0.0f, a->g, 2 * F, ATTN_ACT_NONE));
        } else {
            ATTN_TRY(attn_nn_linear_forward(run, &f->gate, M, x, C, 0.0f, a->g, 2 * F,
                                            ATTN_ACT_NONE));
            ATTN_TRY(attn_nn_linear_forward(run, &f->up, M, x, C, 0.0f, a->g + F, 2 * F,
                                            ATTN_ACT_NONE));
        }
        ATTN_TRY(attn_glu_forward(f->act, M, F, a->g, 2 * F, a->g + F, 2 * F, a->h, F));
    } else if (a->u && needs_preact(f->act)) {
        ATTN_TRY(attn_nn_linear_forward(run, &f->up, M, x, C, 0.0f, a->u, F, ATTN_ACT_NONE));
        ATTN_TRY(attn_act_forward(f->act, (size_t)M * F, a->u, a->h));
    } else {
        ATTN_TRY(attn_nn_linear_forward(run, &f->up, M, x, C, 0.0f, a->h, F, f->act));
    }
    return attn_nn_linear_forward(run, &f->down, M, a->h, F, beta, y, C, ATTN_ACT_NONE);
}

attn_status attn_nn_ffn_backward(const attn_nn_run *run, const attn_nn_ffn *f,
                                 const attn_nn_ffn *g, int M, const float *x,
                                 const attn_nn_ffn_acts *a, const float *dy, float *dx,
                                 bool accumulate, float *work) {
    ATTN_TRY(check(f, "ffn backward"));
    if (!a || !a->h || !work || !dy || !dx)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "ffn backward: NULL argument");
    const int C = f->up.in, F = f->up.out;
    float *dh = work; /* (M, F) */
    ATTN_TRY(attn_nn_linear_backward(run, &f->down, M, a->h, F, dy, C, dh, F, false,
                                     g ? &g->down : NULL));
    if (f->kind == ATTN_FFN_GATED) {
        float *dgu = work + (size_t)M * F; /* (M, 2F): d gate | d up */
        ATTN_TRY(attn_glu_backward(f->act, M, F, a->g, 2 * F, a->g + F, 2 * F, dh, F, dgu, 2 * F,
                                   dgu + F, 2 * F));
        attn_nn_linear pw, pg;
        if (fused_pair(&f->gate, &f->up, &pw) && (!g || fused_pair(&g->gate, &g->up, &pg)))
            return attn_nn_linear_backward(run, &pw, M, x, C, dgu, 2 * F, dx, C, accumulate,
                                           g ? &pg : NULL);
        ATTN_TRY(attn_nn_linear_backward(run, &f->gate, M, x, C, dgu, 2 * F, dx, C, accumulate,
                                         g ? &g->gate : NULL));
        return attn_nn_linear_backward(run, &f->up, M, x, C, dgu + F, 2 * F, dx, C, true,
                                       g ? &g->up : NULL);
    }
    if (needs_preact(f->act)) {
        if (!a->u)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "ffn backward: the forward kept no pre-activation (evaluation mode)");
        ATTN_TRY(attn_act_backward(f->act, (size_t)M * F, a->u, dh, dh));
    } else if (f->act == ATTN_ACT_RELU) {
        ATTN_TRY(attn_act_backward(ATTN_ACT_RELU, (size_t)M * F, a->h, dh, dh));
    }
    return attn_nn_linear_backward(run, &f->up, M, x, C, dh, F, dx, C, accumulate,
                                   g ? &g->up : NULL);
}

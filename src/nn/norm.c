/* norm.c — LayerNorm and RMSNorm as blocks (attn_nn.h), on the kernels of attn_kernels.h. */
#include "nn-impl.h"

#include <string.h>
#include <strings.h>

const char *attn_norm_kind_name(attn_norm_kind k) {
    switch (k) {
    case ATTN_NORM_LAYER: return "layer_norm";
    case ATTN_NORM_RMS: return "rms_norm";
    }
    return "unknown";
}

attn_status attn_norm_kind_parse(const char *name, const char *what, attn_norm_kind *out) {
    if (!name || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL norm name", what);
    if (!strcasecmp(name, "layer_norm") || !strcasecmp(name, "layernorm"))
        *out = ATTN_NORM_LAYER;
    else if (!strcasecmp(name, "rms_norm") || !strcasecmp(name, "rmsnorm"))
        *out = ATTN_NORM_RMS;
    else
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "%s: unknown norm \"%s\" (expected \"layer_norm\" or \"rms_norm\")", what,
                         name);
    return ATTN_STATUS_OK;
}

attn_status attn_nn_norm_forward(const attn_nn_norm *n, int M, const float *x, float *y,
                                 float *mean, float *rstd) {
    if (!n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "norm: NULL block");
    if (n->kind == ATTN_NORM_RMS) return attn_rmsnorm_forward(M, n->dim, x, n->w, n->eps, y, rstd);
    if (n->kind != ATTN_NORM_LAYER)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "norm: unknown kind %d", (int)n->kind);
    return attn_layernorm_forward(M, n->dim, x, n->w, n->b, n->eps, y, mean, rstd);
}

attn_status attn_nn_norm_backward(const attn_nn_norm *n, const attn_nn_norm *g, int M,
                                  const float *x, const float *mean, const float *rstd,
                                  const float *dy, float *dx, bool accumulate, float *tmp) {
    if (!n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "norm backward: NULL block");
    if (accumulate && !tmp)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "norm backward: accumulate needs scratch");
    float *out = accumulate ? tmp : dx;
    float *gw = g ? g->w : NULL, *gb = g ? g->b : NULL;
    if (n->kind == ATTN_NORM_RMS)
        ATTN_TRY(attn_rmsnorm_backward(M, n->dim, x, n->w, rstd, dy, out, gw));
    else
        ATTN_TRY(attn_layernorm_backward(M, n->dim, x, n->w, mean, rstd, dy, out, gw, gb));
    if (accumulate) nn_add((size_t)M * n->dim, dx, tmp, dx);
    return ATTN_STATUS_OK;
}

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
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: unknown norm \"%.40s\" (expected \"layer_norm\" or \"rms_norm\")",
                         what, name);
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

attn_status attn_act_parse(const char *name, const char *what, attn_act *out) {
    static const struct {
        const char *name;
        attn_act act;
    } T[] = {{"gelu", ATTN_ACT_GELU_ERF},          {"gelu_python", ATTN_ACT_GELU_ERF},
             {"gelu_new", ATTN_ACT_GELU_TANH},     {"gelu_pytorch_tanh", ATTN_ACT_GELU_TANH},
             {"gelu_fast", ATTN_ACT_GELU_TANH},    {"gelu_accurate", ATTN_ACT_GELU_TANH},
             {"relu", ATTN_ACT_RELU},              {"silu", ATTN_ACT_SILU},
             {"swish", ATTN_ACT_SILU},             {"linear", ATTN_ACT_NONE},
             {"identity", ATTN_ACT_NONE}};
    if (!name || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL activation", what);
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (strcmp(name, T[i].name) == 0) {
            *out = T[i].act;
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_UNSUPPORTED,
                     "%s: unknown activation \"%.40s\" (expected gelu, gelu_python, gelu_new, "
                     "gelu_pytorch_tanh, gelu_fast, gelu_accurate, relu, silu, swish or linear)",
                     what, name);
}

const char *attn_act_name(attn_act act) {
    switch (act) {
    case ATTN_ACT_GELU_ERF: return "gelu";
    case ATTN_ACT_GELU_TANH: return "gelu_new";
    case ATTN_ACT_RELU: return "relu";
    case ATTN_ACT_SILU: return "silu";
    case ATTN_ACT_NONE: break;
    }
    return "linear";
}

attn_status attn_rope_mode_parse(const char *name, const char *what, attn_rope_mode *out) {
    if (!name || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL rope mode", what);
    if (strcmp(name, "half") == 0)
        *out = ATTN_ROPE_HALF;
    else if (strcmp(name, "interleaved") == 0)
        *out = ATTN_ROPE_INTERLEAVED;
    else
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: unknown rotary embedding mode \"%.40s\" (expected \"half\" or "
                         "\"interleaved\")",
                         what, name);
    return ATTN_STATUS_OK;
}

const char *attn_rope_mode_name(attn_rope_mode mode) {
    return mode == ATTN_ROPE_INTERLEAVED ? "interleaved" : "half";
}

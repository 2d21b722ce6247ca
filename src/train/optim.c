/* optim.c — SGD, Adam and AdamW on flat float buffers, gradient norm/clipping/finiteness.
 *
 * The update mirrors torch.optim (1.13, single-tensor path) operation by operation in float32:
 * torch applies each step as separate tensor ops (mul_, add_, addcmul_, addcdiv_) whose Python
 * float scalars are rounded to float32, with the step-dependent scalars (bias corrections, step
 * size) computed in double. Doing the same here, in the same order, keeps us within float32 ulps
 * of PyTorch (exactly equal except where torch's vectorized add uses an FMA).
 *
 * The work is split into pieces of at most PIECE elements that never straddle a weight-decay
 * boundary; an OpenMP loop runs over the pieces when there are enough, and each piece is a plain
 * loop the compiler vectorizes (`omp simd`). The result does not depend on the thread count. */
#include "train-impl.h"

#include <math.h>
#include <stdlib.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#include <string.h>

#define PIECE ((size_t)1 << 15)
/* Below this many elements threads cost more than they save. */
#define PAR_MIN ((size_t)1 << 17)

attn_optim_params attn_optim_default_params(attn_optim_kind kind) {
    attn_optim_params p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.beta1 = 0.9;
    p.beta2 = 0.999;
    p.eps = 1e-8;
    p.weight_decay = kind == ATTN_OPTIM_ADAMW ? 0.01 : 0.0;
    return p;
}

const char *attn_optim_kind_name(attn_optim_kind k) {
    switch (k) {
    case ATTN_OPTIM_SGD: return "sgd";
    case ATTN_OPTIM_ADAM: return "adam";
    case ATTN_OPTIM_ADAMW: return "adamw";
    }
    return "?";
}

attn_status attn_optim_kind_parse(const char *name, attn_optim_kind *out) {
    if (!name || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "optimizer kind: NULL");
    for (int k = 0; k <= ATTN_OPTIM_ADAMW; k++)
        if (strcmp(name, attn_optim_kind_name((attn_optim_kind)k)) == 0) {
            *out = (attn_optim_kind)k;
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "unknown optimizer '%.40s' (expected sgd, adam or adamw)", name);
}

static attn_status check_params(const attn_optim_params *p) {
    if ((unsigned)p->kind > ATTN_OPTIM_ADAMW)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "optimizer: invalid kind %d", (int)p->kind);
    if (!(p->weight_decay >= 0) || !isfinite(p->weight_decay))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "optimizer: weight_decay must be finite and >= 0, got %g", p->weight_decay);
    if (p->kind == ATTN_OPTIM_SGD) {
        if (!(p->momentum >= 0) || !isfinite(p->momentum) || !isfinite(p->dampening))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "optimizer sgd: momentum must be finite and >= 0, got %g",
                             p->momentum);
        if (p->nesterov && (p->momentum <= 0 || p->dampening != 0))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "optimizer sgd: nesterov needs momentum > 0 and dampening 0");
        return ATTN_STATUS_OK;
    }
    if (!(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "optimizer %s: betas must be in [0, 1), got (%g, %g)",
                         attn_optim_kind_name(p->kind), p->beta1, p->beta2);
    if (!(p->eps >= 0) || !isfinite(p->eps))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "optimizer %s: eps must be >= 0, got %g",
                         attn_optim_kind_name(p->kind), p->eps);
    return ATTN_STATUS_OK;
}

static int range_cmp(const void *a, const void *b) {
    const attn_optim_range *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static bool add_piece(attn_optim *o, size_t *cap, size_t i0, size_t i1, bool decay) {
    for (size_t s = i0; s < i1; s += PIECE) {
        if (o->npieces == *cap) {
            size_t nc = *cap ? 2 * *cap : 16;
            attn_optim_piece *np = realloc(o->pieces, nc * sizeof *np);
            if (!np) return false;
            o->pieces = np;
            *cap = nc;
        }
        o->pieces[o->npieces++] = (attn_optim_piece){s, ATTN_MIN(i1, s + PIECE), decay};
    }
    return true;
}

void attn_optim_destroy(attn_optim *o) {
    if (!o) return;
    attn_free(o->m);
    attn_free(o->v);
    free(o->pieces);
    free(o);
}

attn_status attn_optim_create(const attn_optim_params *p, size_t n, const attn_optim_range *ranges,
                              int nranges, attn_optim **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_create: out is NULL");
    *out = NULL;
    if (!p) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_create: params is NULL");
    if (nranges < 0 || (nranges > 0 && !ranges))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_create: bad range list (%d)",
                         nranges);
    attn_status s = check_params(p);
    if (s) return s;
    size_t bytes;
    if (!attn_size_mul(n, sizeof(float), &bytes) || bytes > ATTN_MAX_BUFFER_BYTES)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "attn_optim_create: %zu parameters is too many", n);
    attn_optim_range *rs = malloc(((size_t)nranges + 1) * sizeof *rs);
    attn_optim *o = calloc(1, sizeof *o);
    if (!rs || !o) {
        free(rs);
        free(o);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_optim_create: out of memory");
    }
    if (nranges) memcpy(rs, ranges, (size_t)nranges * sizeof *rs);
    qsort(rs, (size_t)nranges, sizeof *rs, range_cmp);
    o->p = *p;
    o->n = n;
    size_t cap = 0, at = 0;
    bool ok = true;
    for (int i = 0; i < nranges && !s; i++) {
        const attn_optim_range *r = &rs[i];
        if (r->offset > n || r->length > n - r->offset)
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "attn_optim_create: range '%s' [%zu, +%zu) is outside the %zu parameters",
                          r->name ? r->name : "?", r->offset, r->length, n);
        else if (r->offset < at)
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "attn_optim_create: range '%s' at %zu overlaps the previous one",
                          r->name ? r->name : "?", r->offset);
        else {
            ok = ok && add_piece(o, &cap, at, r->offset, true) &&
                 add_piece(o, &cap, r->offset, r->offset + r->length, r->decay);
            at = r->offset + r->length;
        }
    }
    free(rs);
    if (!s) ok = ok && add_piece(o, &cap, at, n, true);
    if (!s && !ok) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_optim_create: out of memory");
    if (!s) {
        bool need_m = p->kind != ATTN_OPTIM_SGD || p->momentum != 0;
        bool need_v = p->kind != ATTN_OPTIM_SGD;
        if (need_m && !(o->m = attn_calloc(bytes))) ok = false;
        if (need_v && !(o->v = attn_calloc(bytes))) ok = false;
        if (!ok)
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                          "attn_optim_create: out of memory for the state of %zu parameters", n);
    }
    if (s) {
        attn_optim_destroy(o);
        return s;
    }
    *out = o;
    return ATTN_STATUS_OK;
}

size_t attn_optim_size(const attn_optim *o) { return o ? o->n : 0; }
int64_t attn_optim_step_count(const attn_optim *o) { return o ? o->step : 0; }
const attn_optim_params *attn_optim_get_params(const attn_optim *o) { return o ? &o->p : NULL; }

void attn_optim_state(attn_optim *o, float **m, float **v) {
    if (m) *m = o ? o->m : NULL;
    if (v) *v = o ? o->v : NULL;
}

attn_status attn_optim_set_state(attn_optim *o, int64_t step, const float *m, const float *v) {
    if (!o || step < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_set_state: bad arguments");
    size_t bytes = o->n * sizeof(float);
    if (o->m) {
        if (m) memcpy(o->m, m, bytes);
        else memset(o->m, 0, bytes);
    }
    if (o->v) {
        if (v) memcpy(o->v, v, bytes);
        else memset(o->v, 0, bytes);
    }
    o->step = step;
    return ATTN_STATUS_OK;
}

/* ---- the updates, one piece at a time ---- */

typedef struct {
    float b1, one_m_b1, b2, one_m_b2; /* torch rounds each Python scalar to float */
    float wd_l2;                      /* Adam: grad + wd·param */
    float decay_mul;                  /* AdamW: param · (1 − lr·wd) */
    float bc2_sqrt, eps, neg_step_size;
    float gscale;                     /* the gradients are read as g · gscale (clipping; 1: as is) */
} adam_consts;

/* sqrtf over a block. sqrtf may set errno, which stops both gcc and clang from vectorizing a loop
 * that calls it (without -fno-math-errno); SSE's sqrtps is the same correctly rounded operation. */
#define SQRT_BLOCK 256
static void sqrt_block(float *restrict dst, const float *restrict src, size_t n) {
    size_t i = 0;
#if defined(__SSE__)
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, _mm_sqrt_ps(_mm_loadu_ps(src + i)));
#endif
    for (; i < n; i++) dst[i] = sqrtf(src[i]);
}

static void adam_piece(float *restrict p, const float *restrict g, float *restrict m,
                       float *restrict v, size_t i0, size_t i1, bool decay, bool adamw,
                       const adam_consts *c) {
    const float b1 = c->b1, a1 = c->one_m_b1, b2 = c->b2, a2 = c->one_m_b2;
    const float wd = decay && !adamw ? c->wd_l2 : 0.0f;
    const float dm = decay && adamw ? c->decay_mul : 1.0f; /* x·1 == x exactly */
    const float bc2 = c->bc2_sqrt, eps = c->eps, nss = c->neg_step_size, gs = c->gscale;
    float sq[SQRT_BLOCK];
    for (size_t b0 = i0; b0 < i1; b0 += SQRT_BLOCK) {
        size_t b1e = ATTN_MIN(i1, b0 + SQRT_BLOCK);
        /* moments (and AdamW's decay of p, kept in p until the update below) */
#pragma omp simd
        for (size_t i = b0; i < b1e; i++) {
            float pi = p[i] * dm;                         /* param.mul_(1 - lr*wd) */
            float g0 = g[i] * gs;                          /* clip: grad.mul_(coef) (or · 1) */
            float gi = wd != 0.0f ? g0 + wd * pi : g0;     /* grad.add(param, alpha=wd) */
            float mi = m[i] * b1;                          /* exp_avg.mul_(beta1) */
            m[i] = mi + a1 * gi;                           /*   .add_(grad, alpha=1-beta1) */
            float vi = v[i] * b2;                          /* exp_avg_sq.mul_(beta2) */
            v[i] = vi + a2 * gi * gi;                      /*   .addcmul_(grad, grad, 1-beta2) */
            p[i] = pi;
        }
        sqrt_block(sq, v + b0, b1e - b0);
#pragma omp simd
        for (size_t i = b0; i < b1e; i++) {
            float den = sq[i - b0] / bc2 + eps; /* (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps) */
            p[i] = p[i] + nss * m[i] / den;     /* param.addcdiv_(exp_avg, denom, -step_size) */
        }
    }
}

typedef struct {
    float wd, mom, one_m_damp, neg_lr;
    float gscale; /* as adam_consts' */
    bool first, nesterov;
} sgd_consts;

static void sgd_piece(float *restrict p, const float *restrict g, float *restrict b, size_t i0,
                      size_t i1, bool decay, const sgd_consts *c) {
    const float wd = decay ? c->wd : 0.0f, mom = c->mom, omd = c->one_m_damp, nlr = c->neg_lr;
    const float gs = c->gscale;
    if (!b) {
#pragma omp simd
        for (size_t i = i0; i < i1; i++) {
            float g0 = g[i] * gs;
            float gi = wd != 0.0f ? g0 + wd * p[i] : g0;
            p[i] = p[i] + nlr * gi;
        }
        return;
    }
    const bool first = c->first, nest = c->nesterov;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
        float g0 = g[i] * gs;
        float gi = wd != 0.0f ? g0 + wd * p[i] : g0;
        float bi = first ? gi : b[i] * mom + omd * gi; /* buf.mul_(momentum).add_(d_p, 1-damp) */
        float d = nest ? gi + mom * bi : bi;           /* d_p.add(buf, alpha=momentum) */
        p[i] = p[i] + nlr * d;
        b[i] = bi;
    }
}

static attn_status step_scaled(attn_optim *o, float *params, const float *grads, float gscale,
                               double lr) {
    if (!o) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_step: optimizer is NULL");
    if (o->n && (!params || !grads))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_step: params or grads is NULL");
    if (!(lr >= 0) || !isfinite(lr))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_optim_step: learning rate must be finite and >= 0, got %g", lr);
    const attn_optim_params *p = &o->p;
    const long np = (long)o->npieces;
    const attn_optim_piece *pc = o->pieces;
    const bool par = o->n >= PAR_MIN;
    if (p->kind == ATTN_OPTIM_SGD) {
        sgd_consts c = {(float)p->weight_decay, (float)p->momentum, (float)(1.0 - p->dampening),
                        (float)-lr, gscale, o->step == 0, p->nesterov};
        float *b = o->m;
#pragma omp parallel for schedule(static) if (par)
        for (long k = 0; k < np; k++)
            sgd_piece(params, grads, b, pc[k].i0, pc[k].i1, pc[k].decay, &c);
    } else {
        bool adamw = p->kind == ATTN_OPTIM_ADAMW;
        double t = (double)(o->step + 1);
        double bc1 = 1.0 - pow(p->beta1, t), bc2 = 1.0 - pow(p->beta2, t);
        adam_consts c;
        c.b1 = (float)p->beta1;
        c.one_m_b1 = (float)(1.0 - p->beta1);
        c.b2 = (float)p->beta2;
        c.one_m_b2 = (float)(1.0 - p->beta2);
        c.wd_l2 = (float)p->weight_decay;
        c.decay_mul = (float)(1.0 - lr * p->weight_decay);
        c.bc2_sqrt = (float)sqrt(bc2);
        c.eps = (float)p->eps;
        c.neg_step_size = (float)-(lr / bc1);
        c.gscale = gscale;
        float *m = o->m, *v = o->v;
#pragma omp parallel for schedule(static) if (par)
        for (long k = 0; k < np; k++)
            adam_piece(params, grads, m, v, pc[k].i0, pc[k].i1, pc[k].decay, adamw, &c);
    }
    o->step++;
    return ATTN_STATUS_OK;
}

attn_status attn_optim_step(attn_optim *o, float *params, const float *grads, double lr) {
    return step_scaled(o, params, grads, 1.0f, lr);
}

/* ---- gradients ---- */

void attn_optim_zero_grad(float *grads, size_t n) {
    if (grads && n) memset(grads, 0, n * sizeof *grads);
}

static double sumsq_chunk(const float *g, size_t i0, size_t i1) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (size_t i = i0; i < i1; i++) s += (double)g[i] * g[i];
    return s;
}

double attn_optim_grad_norm(const float *grads, size_t n) {
    if (!grads || !n) return 0.0;
    /* Fixed chunks summed in a fixed order: the same bits for any thread count. */
    size_t nch = (n + PIECE - 1) / PIECE;
    double stackbuf[64], *part = nch <= 64 ? stackbuf : malloc(nch * sizeof *part);
    if (!part) { /* no memory for partial sums: one sequential pass, same chunking */
        double s = 0;
        for (size_t c = 0; c < nch; c++) s += sumsq_chunk(grads, c * PIECE, ATTN_MIN(n, (c + 1) * PIECE));
        return sqrt(s);
    }
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (long c = 0; c < (long)nch; c++)
        part[c] = sumsq_chunk(grads, (size_t)c * PIECE, ATTN_MIN(n, ((size_t)c + 1) * PIECE));
    double s = 0;
    for (size_t c = 0; c < nch; c++) s += part[c];
    if (part != stackbuf) free(part);
    return sqrt(s);
}

/* torch: clip_coef = max_norm / (total_norm + 1e-6) in float32, clamped to 1 (1: no scaling). */
static float clip_coef(double total, double max_norm) {
    if (!isfinite(total) || !(max_norm > 0)) return 1.0f;
    const float coef = (float)max_norm / ((float)total + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

double attn_optim_clip_grad_norm(float *grads, size_t n, double max_norm) {
    double total = attn_optim_grad_norm(grads, n);
    const float coef = clip_coef(total, max_norm);
    if (coef < 1.0f) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
        for (long c = 0; c < (long)((n + PIECE - 1) / PIECE); c++) {
            size_t i1 = ATTN_MIN(n, ((size_t)c + 1) * PIECE);
#pragma omp simd
            for (size_t i = (size_t)c * PIECE; i < i1; i++) grads[i] *= coef;
        }
    }
    return total;
}

attn_status attn_optim_check_finite(const float *grads, size_t n, const attn_optim_range *ranges,
                                    int nranges, size_t *first_bad) {
    if (n && !grads)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_check_finite: grads is NULL");
    /* x·0 is 0 for finite x and NaN for inf/NaN, so one vectorized sum finds any bad value. */
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (size_t i = 0; i < n; i++) acc += grads[i] * 0.0f;
    if (acc == 0.0f) return ATTN_STATUS_OK;
    size_t bad = 0;
    while (bad < n && isfinite(grads[bad])) bad++;
    if (bad == n) return ATTN_STATUS_OK; /* unreachable: acc was NaN */
    if (first_bad) *first_bad = bad;
    float x = grads[bad];
    const char *what = isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
    for (int r = 0; ranges && r < nranges; r++)
        if (bad >= ranges[r].offset && bad - ranges[r].offset < ranges[r].length)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gradient of '%s'[%zu] (index %zu) is %s",
                             ranges[r].name ? ranges[r].name : "?", bad - ranges[r].offset, bad,
                             what);
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gradient at index %zu is %s", bad, what);
}

attn_status attn_optim_clip_step(attn_optim *o, float *params, const float *grads, double max_norm,
                                 double lr, const attn_optim_range *ranges, int nranges,
                                 double *norm) {
    if (!o) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_step: optimizer is NULL");
    const double total = attn_optim_grad_norm(grads, o->n);
    if (norm) *norm = total;
    /* The norm is finite exactly when every gradient is (squares summed in double cannot
     * overflow for float inputs): only then is the slower scan that names the bad one needed. */
    if (!isfinite(total)) {
        attn_status s = attn_optim_check_finite(grads, o->n, ranges, nranges, NULL);
        if (s) return s;
    }
    return step_scaled(o, params, grads, clip_coef(total, max_norm), lr);
}

attn_status attn_optim_clip_step_with_norm(attn_optim *o, float *params, const float *grads,
                                           double total, double max_norm, double lr) {
    if (!o) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_optim_step: optimizer is NULL");
    if (!isfinite(total))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_optim_clip_step_with_norm: the gradient norm is %g", total);
    return step_scaled(o, params, grads, clip_coef(total, max_norm), lr);
}

/* test_attention.c — scaled-dot-product attention kernels (attn_attention_forward/backward) on
 * every available backend:
 *   1. against PyTorch in float64 (tools/ref_attention.py): o, lse, probabilities, dq, dk, dv
 *      (and dbias) for every mask kind (sliding windows of 1, 2, 5, 7, 24, 33, 37, 45, 64, 65,
 *      70, 100, 130 keys and >= T, with KV-cache offsets, padding, GQA, fused strides and
 *      biases), odd sizes, 1..16 heads, D 16..160, T up to 2048,
 *      fused-QKV strides, grouped- and multi-query heads (H_kv < H), KV-cache batch strides with
 *      NaN in the unused rows, and additive score biases (shared across the batch or heads or
 *      queries, relative positions through bias_sq = -1, -inf entries, rows left without a
 *      visible key);
 *   2. the reference path's gradients (incl. dbias, with GQA) against double-precision central
 *      differences;
 *   3. the SIMD paths against the reference path over random shapes, masks (sliding windows
 *      included), strides, H_kv and biases (including head sizes outside the tiled path's range);
 *      their few-query path (decoding) against their tiled path: bit-identical;
 *   4. mask properties (causality, padding, probabilities summing to 1, empty rows give 0;
 *      a window covering every key is no window to the bit, keys out of every window change
 *      nothing to the bit, the window as a -inf bias gives the window's results) and
 *      layout / bias properties (batch strides, negative strides and H_kv = H change no bit; a
 *      zero bias changes no bit; dbias is 0 exactly where masked; the causal mask as a -inf
 *      bias gives the causal results);
 *   5. invalid parameters.
 * Every run also checks that row padding (columns past the heads) and unused cache rows are never
 * written, and that asking for the probabilities leaves o bit-identical.
 *
 * Tolerances, as max|err| <= rtol · max|ref| (fp32 kernels against a float64 reference):
 *   o, probabilities: 1e-5.  lse: 1e-6 (relative to max|lse|; lse is O(log Tk)).
 *   dq, dk, dv: 1e-5 of the case's largest gradient (max over dq, dk and dv), so that gradients
 *   that are exactly 0 in exact arithmetic (one visible key: dq = 0) may carry rounding noise.
 *   dbias: 1e-5 of max(max|dbias|, that largest gradient), for the same reason (one visible key:
 *   dS = 0 exactly). Measured worst over the 43 PyTorch cases (avx2): o 1.6e-6, lse 3.8e-7,
 *   probs 2.1e-6, dq 1.0e-6, dk 9.6e-7, dv 6.6e-7, dbias 7.3e-7; ref: <= 3e-7; over the 15
 *   sliding-window cases alone (avx2): o 4.8e-7, lse 1.4e-7, probs 7.8e-7, dq 4.7e-7, dk 3.5e-7,
 *   dv 5.2e-7, dbias 6.6e-7.
 *   Central differences: 2e-3 (float forward, step 4e-3: truncation and rounding both ~1e-4).
 *   SIMD against the reference on random shapes: 2× the above (see RANDOM_LOOSE; measured worst
 *   8.1e-6, o with a dense bias and scale 1.13). */
#include "tu.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_quant.h"

#define RTOL_FWD 1e-5
#define RTOL_LSE 1e-6
#define RTOL_GRAD 1e-5
#define RTOL_FD 2e-3
#define RTOL_DBIAS 1e-5
/* SIMD vs reference on random draws: twice the above. Uniform inputs with random scales (and
 * biases up to ±3.5) give peakier softmaxes (larger |scores|) than the PyTorch cases, and the
 * error of fp32 attention is dominated by the rounding of the scores, which grows with |s|
 * (measured: up to 8.1e-6). */
#define RANDOM_LOOSE 2.0
#define SENTINEL 1234.5f

static const attn_backend ALL_BACKENDS[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2,
                                            ATTN_BACKEND_AVX512};
#define NBACKENDS 3

/* Every check that runs on one backend is its own cmocka test per backend: NAME(bi) runs on
 * ALL_BACKENDS[bi] and starts with tu_need_backend, so a backend this CPU lacks is skipped alone
 * (a hardware skip); each draws the same data from the same seeds.
 * PER_BACKEND(NAME): test_NAME_ref, test_NAME_avx2, test_NAME_avx512;
 * PER_SIMD_BACKEND(NAME): test_NAME_avx2, test_NAME_avx512 (NAME compares them to ref). */
#define PER_SIMD_BACKEND(name)                                                                   \
    static void test_##name##_avx2(void **state) {                                               \
        (void)state;                                                                             \
        name(1);                                                                                 \
    }                                                                                            \
    static void test_##name##_avx512(void **state) {                                             \
        (void)state;                                                                             \
        name(2);                                                                                 \
    }
#define PER_BACKEND(name)                                                                        \
    static void test_##name##_ref(void **state) {                                                \
        (void)state;                                                                             \
        name(0);                                                                                 \
    }                                                                                            \
    PER_SIMD_BACKEND(name)

/* ---- running one attention with a chosen memory layout --------------------------------------- */

/* Results, always contiguous: o (B, Tq, H, D), lse (B, H, Tq), probs (B, H, Tq, Tk) or NULL,
 * dq (B, Tq, H, D), dk, dv (B, Tk, H_kv, D), dbias (B, H, Tq, Tk) or NULL. */
typedef struct {
    float *o, *lse, *probs, *dq, *dk, *dv, *dbias;
} outs;

static int kv_heads(const attn_attention_params *p) { return p->H_kv ? p->H_kv : p->H; }

/* dbias: allocate it (the backward then computes d loss / d bias; needs p->bias). */
static void outs_alloc(outs *r, const attn_attention_params *p, bool probs, bool dbias) {
    size_t hd = (size_t)p->H * p->D, kd = (size_t)kv_heads(p) * p->D;
    size_t np = (size_t)p->B * p->H * p->Tq * p->Tk;
    r->o = calloc((size_t)p->B * p->Tq * hd, sizeof(float));
    r->lse = calloc((size_t)p->B * p->H * p->Tq, sizeof(float));
    r->probs = probs ? calloc(np, sizeof(float)) : NULL;
    r->dq = calloc((size_t)p->B * p->Tq * hd, sizeof(float));
    r->dk = calloc((size_t)p->B * p->Tk * kd, sizeof(float));
    r->dv = calloc((size_t)p->B * p->Tk * kd, sizeof(float));
    r->dbias = dbias ? calloc(np, sizeof(float)) : NULL;
}

static void outs_free(outs *r) {
    free(r->o);
    free(r->lse);
    free(r->probs);
    free(r->dq);
    free(r->dk);
    free(r->dv);
    free(r->dbias);
}

static void fill(float *x, size_t n, float val) {
    for (size_t i = 0; i < n; i++) x[i] = val;
}

/* How run_attention lays the tensors out in memory. */
typedef struct {
    bool fused;   /* q, k, v (and dq, dk, dv) in one buffer, row (H + 2·H_kv)·D + pad */
    int pad;      /* extra columns per row, never to be read or written */
    int extra;    /* extra rows per batch (batch strides (T + extra)·ld): a KV cache */
    bool reverse; /* negative batch strides: batch b lives below batch 0 */
} layout;

/* One allocation of B batches × R = T + extra rows × ld columns and the (b, t) addressing attn
 * gets for it: base (batch 0, row 0) and batch stride sb (0, the packed default, when it is
 * T·ld). Inputs hold SENTINEL in the pad columns and NaN in the unused rows (any read of them
 * shows up as NaN in the results); outputs start all SENTINEL (any stray write shows up). */
typedef struct {
    float *mem, *base;
    ptrdiff_t sb;
    int B, T, R, ld;
} slab;

static void slab_init(slab *s, int B, int T, int ld, const layout *L, bool input) {
    s->B = B;
    s->T = T;
    s->R = T + L->extra;
    s->ld = ld;
    const ptrdiff_t step = (ptrdiff_t)s->R * ld;
    const size_t n = (size_t)B * step;
    s->mem = malloc(sizeof(float) * n);
    fill(s->mem, n, SENTINEL);
    if (input)
        for (int b = 0; b < B; b++)
            fill(s->mem + b * step + (ptrdiff_t)T * ld, (size_t)L->extra * ld, NAN);
    s->base = L->reverse ? s->mem + (B - 1) * step : s->mem;
    s->sb = L->reverse ? -step : L->extra ? step : 0;
}

static float *slab_row(const slab *s, int b, int t) {
    return s->base + (ptrdiff_t)b * (s->sb ? s->sb : (ptrdiff_t)s->T * s->ld) + (ptrdiff_t)t * s->ld;
}

/* Columns [col, col + w) of the used rows = src (B, T, w), or the reverse. */
static void slab_put(slab *s, int col, const float *src, int w) {
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++)
            memcpy(slab_row(s, b, t) + col, src + ((size_t)b * s->T + t) * w, sizeof(float) * w);
}
static void slab_get(const slab *s, int col, float *dst, int w) {
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++)
            memcpy(dst + ((size_t)b * s->T + t) * w, slab_row(s, b, t) + col, sizeof(float) * w);
}
/* Entries outside columns [0, w) of the used rows that no longer hold SENTINEL. */
static size_t slab_touched(const slab *s, int w) {
    size_t bad = 0;
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->R; t++) {
            const float *row = s->mem + ((size_t)b * s->R + t) * s->ld;
            for (int c = t < s->T ? w : 0; c < s->ld; c++) bad += row[c] != SENTINEL;
        }
    return bad;
}

/* Runs forward (without and with probabilities) and backward on the current backend.
 * shape: sizes, scale, mask, H_kv and bias (its row and batch strides are ignored: L sets them).
 * fused: q, k, v (and dq, dk, dv) live in one (B·T, (H + 2·H_kv)·D + pad) buffer; else each in
 * its own with row stride (H or H_kv)·D + pad. o and dO use H·D + pad. q, k, v, dO are
 * contiguous (B, T, H or H_kv, D). r->dbias, if allocated, receives d loss / d bias. */
static attn_status run_attention(const attn_attention_params *shape, const layout *L,
                                 const float *q, const float *k, const float *v, const float *dO,
                                 outs *r) {
    attn_attention_params p = *shape;
    const int hd = p.H * p.D, kd = kv_heads(&p) * p.D;
    const int ldo = hd + L->pad;
    enum { Q, K, V, GQ, GK, GV, O, O2, DO, NSLAB };
    slab sl[NSLAB];
    memset(sl, 0, sizeof sl);
    const float *xq, *xk, *xv;
    float *gq, *gk, *gv;
    if (L->fused) { /* fused needs Tq == Tk */
        const int ldx = hd + 2 * kd + L->pad;
        slab_init(&sl[Q], p.B, p.Tq, ldx, L, true);
        slab_init(&sl[GQ], p.B, p.Tq, ldx, L, false);
        slab_put(&sl[Q], 0, q, hd);
        slab_put(&sl[Q], hd, k, kd);
        slab_put(&sl[Q], hd + kd, v, kd);
        p.ldq = p.ldk = p.ldv = ldx;
        p.sbq = p.sbk = p.sbv = sl[Q].sb;
        xq = slab_row(&sl[Q], 0, 0), xk = xq + hd, xv = xq + hd + kd;
        gq = slab_row(&sl[GQ], 0, 0), gk = gq + hd, gv = gq + hd + kd;
    } else {
        slab_init(&sl[Q], p.B, p.Tq, hd + L->pad, L, true);
        slab_init(&sl[K], p.B, p.Tk, kd + L->pad, L, true);
        slab_init(&sl[V], p.B, p.Tk, kd + L->pad, L, true);
        slab_init(&sl[GQ], p.B, p.Tq, hd + L->pad, L, false);
        slab_init(&sl[GK], p.B, p.Tk, kd + L->pad, L, false);
        slab_init(&sl[GV], p.B, p.Tk, kd + L->pad, L, false);
        slab_put(&sl[Q], 0, q, hd);
        slab_put(&sl[K], 0, k, kd);
        slab_put(&sl[V], 0, v, kd);
        p.ldq = hd + L->pad;
        p.ldk = p.ldv = kd + L->pad;
        p.sbq = sl[Q].sb;
        p.sbk = sl[K].sb;
        p.sbv = sl[V].sb;
        xq = slab_row(&sl[Q], 0, 0), xk = slab_row(&sl[K], 0, 0), xv = slab_row(&sl[V], 0, 0);
        gq = slab_row(&sl[GQ], 0, 0), gk = slab_row(&sl[GK], 0, 0), gv = slab_row(&sl[GV], 0, 0);
    }
    slab_init(&sl[O], p.B, p.Tq, ldo, L, false);
    slab_init(&sl[O2], p.B, p.Tq, ldo, L, false);
    slab_init(&sl[DO], p.B, p.Tq, ldo, L, true);
    slab_put(&sl[DO], 0, dO, hd);
    p.ldo = ldo;
    p.sbo = sl[O].sb;
    float *xo = slab_row(&sl[O], 0, 0), *xo2 = slab_row(&sl[O2], 0, 0);
    p.dbias = r->dbias;
    if (r->dbias) fill(r->dbias, (size_t)p.B * p.H * p.Tq * p.Tk, NAN); /* all must be written */

    attn_status s = attn_attention_forward(&p, xq, xk, xv, xo, r->lse, NULL);
    if (s == ATTN_STATUS_OK && r->probs)
        s = attn_attention_forward(&p, xq, xk, xv, xo2, NULL, r->probs);
    if (s == ATTN_STATUS_OK)
        s = attn_attention_backward(&p, xq, xk, xv, xo, r->lse, slab_row(&sl[DO], 0, 0), gq, gk,
                                    gv);
    if (s == ATTN_STATUS_OK) {
        slab_get(&sl[O], 0, r->o, hd);
        slab_get(&sl[GQ], 0, r->dq, hd);
        slab_get(L->fused ? &sl[GQ] : &sl[GK], L->fused ? hd : 0, r->dk, kd);
        slab_get(L->fused ? &sl[GQ] : &sl[GV], L->fused ? hd + kd : 0, r->dv, kd);
        size_t bad = slab_touched(&sl[O], hd);
        if (L->fused)
            bad += slab_touched(&sl[GQ], hd + 2 * kd);
        else
            bad += slab_touched(&sl[GQ], hd) + slab_touched(&sl[GK], kd) +
                   slab_touched(&sl[GV], kd);
        if (bad) {
            printf("  FAIL: %zu padding entries (columns past the heads, unused rows) were "
                   "written\n",
                   bad);
            tu_failures++;
        }
        if (r->probs && memcmp(sl[O].mem, sl[O2].mem,
                               sizeof(float) * (size_t)p.B * sl[O].R * ldo) != 0) {
            printf("  FAIL: o differs when the probabilities are requested\n");
            tu_failures++;
        }
    }
    for (int i = 0; i < NSLAB; i++) free(sl[i].mem);
    return s;
}

static const layout PACKED = {false, 0, 0, false};

/* lse comparison: -inf (empty rows) must match exactly; the finite values within tolerance. */
static int lse_close(const char *what, const float *got, const float *ref, size_t n, double rtol) {
    float *g = malloc(sizeof(float) * n), *e = malloc(sizeof(float) * n);
    size_t mism = 0;
    for (size_t i = 0; i < n; i++) {
        bool gi = isinf(got[i]) && got[i] < 0, ri = isinf(ref[i]) && ref[i] < 0;
        mism += gi != ri;
        g[i] = gi ? 0.0f : got[i];
        e[i] = ri ? 0.0f : ref[i];
    }
    int ok = tu_close(what, g, e, n, rtol, 0);
    if (mism) {
        printf("    %s: %zu rows disagree on being empty (-inf)\n", what, mism);
        tu_failures++;
        ok = 0;
    }
    free(g);
    free(e);
    return ok;
}

/* Worst relative error per quantity and backend over all cases (and over the sliding-window
 * cases alone), for the closing summary. */
#define NQ 7
static double worst[NBACKENDS][NQ], worst_window[NBACKENDS][NQ];
static const char *const QNAMES[NQ] = {"o", "lse", "probs", "dq", "dk", "dv", "dbias"};

/* max|got - ref| / max(max|ref|, floor); -inf matching -inf counts as exact. */
static double rel_err(const float *got, const float *ref, size_t n, double floor) {
    double err = 0, scale = floor;
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i]) && isinf(got[i]) && (ref[i] < 0) == (got[i] < 0)) continue;
        double e = fabs((double)got[i] - ref[i]);
        if (e > err || e != e) err = e;
        if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    }
    return scale > 0 ? err / scale : err;
}

static double max_abs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* loose: tolerance multiplier (1 against PyTorch). probs, dbias: whether to compare them. */
static void compare(int bi, const char *tag, const attn_attention_params *p, const outs *got,
                    const outs *ref, bool probs, bool dbias, double loose) {
    char what[96];
    const size_t nq = (size_t)p->B * p->Tq * p->H * p->D;
    const size_t nk = (size_t)p->B * p->Tk * kv_heads(p) * p->D;
    const size_t nl = (size_t)p->B * p->H * p->Tq, np = nl * p->Tk;
    const float *g[NQ] = {got->o, got->lse, got->probs, got->dq, got->dk, got->dv, got->dbias};
    const float *e[NQ] = {ref->o, ref->lse, ref->probs, ref->dq, ref->dk, ref->dv, ref->dbias};
    const size_t n[NQ] = {nq, nl, np, nq, nk, nk, np};
    const double rtol[NQ] = {RTOL_FWD,  RTOL_LSE,  RTOL_FWD, RTOL_GRAD,
                             RTOL_GRAD, RTOL_GRAD, RTOL_DBIAS};
    /* Gradients are judged against the case's largest gradient: a gradient that is exactly 0
     * in exact arithmetic (e.g. dq with one visible key) comes out as rounding noise. */
    double gscale = 0;
    for (int i = 3; i < 6; i++)
        for (size_t j = 0; j < n[i]; j++) gscale = fmax(gscale, fabs(e[i][j]));
    for (int i = 0; i < NQ; i++) {
        if ((i == 2 && !probs) || (i == 6 && !dbias)) continue;
        snprintf(what, sizeof what, "%s %s", tag, QNAMES[i]);
        /* dbias against max(max|dbias|, the largest other gradient): dS is exactly 0 in exact
         * arithmetic when a query sees one key (P = 1, o = v), and then only rounding noise. */
        const double floor = i >= 3 ? gscale : 0;
        if (i == 1)
            lse_close(what, g[i], e[i], n[i], loose * rtol[i]);
        else if (i >= 3)
            tu_close(what, g[i], e[i], n[i], 0,
                     loose * rtol[i] * (i == 6 ? fmax(floor, max_abs(e[i], n[i])) : floor));
        else
            tu_close(what, g[i], e[i], n[i], loose * rtol[i], 0);
        if (bi >= 0) {
            double r = rel_err(g[i], e[i], n[i], floor);
            if (r > worst[bi][i] || r != r) worst[bi][i] = r;
            if (p->window && (r > worst_window[bi][i] || r != r)) worst_window[bi][i] = r;
        }
    }
}

/* ---- 1. against PyTorch ---------------------------------------------------------------------- */

static float *load_f32(attn_st_file *f, int c, const char *name, bool required) {
    char key[64];
    snprintf(key, sizeof key, "attn.%d.%s", c, name);
    if (!required && !attn_st_find(f, key)) return NULL;
    float *x = NULL;
    attn_status s = attn_st_load_f32(f, key, &x, NULL);
    if (s) fail_msg("%s: %s", key, attn_last_error());
    return x;
}

static void vs_torch(int bi) {
    tu_need_backend(ALL_BACKENDS[bi]);
    attn_st_file *f = NULL;
    const char *path = tu_ref_path("attention.safetensors");
    if (attn_st_open(path, &f))
        fail_msg("%s: %s (run tools/ref_attention.py first)", path, attn_last_error());
    int ncases = 0;
    for (int c = 0;; c++) {
        char key[64];
        snprintf(key, sizeof key, "attn.%d.params", c);
        const char *meta = attn_st_metadata(f, key);
        if (!meta) break;
        ncases++;
        int B, H, Tq, Tk, D, causal, off, fused, H_kv, extra, has_bias, window;
        long long bsb, bsh, bsq, boff;
        double scale;
        assert_int_equal(sscanf(meta,
                                "%d %d %d %d %d %d %d %d %lf %d %d %d %lld %lld %lld %lld %d",
                                &B, &H, &Tq, &Tk, &D, &causal, &off, &fused, &scale, &H_kv,
                                &extra, &has_bias, &bsb, &bsh, &bsq, &boff, &window),
                         17);
        /* Under valgrind (tu_valgrind) the largest shapes (2048 keys; the training benchmark's
         * 2x6x256x256x64; sliding windows above 1.5e6) are left out: the others take the same
         * paths (several blocks, every mask, fused strides, windows skipping key tiles from an
         * unaligned start); make test / make san run them all. */
        if (tu_valgrind() && (double)B * H * Tq * Tk * D > (window ? 1.5e6 : 6e6)) {
            ncases--;
            continue;
        }
        attn_attention_params p = attn_attention_default_params(B, H, Tq, Tk, D);
        p.scale = (float)scale;
        p.causal = causal;
        p.causal_offset = off;
        p.window = window;
        p.H_kv = H_kv == H ? 0 : H_kv; /* H_kv = H is also the default 0 */
        float *bias = NULL;
        if (has_bias) {
            bias = load_f32(f, c, "bias", true);
            p.bias = bias + boff;
            p.bias_sb = (ptrdiff_t)bsb;
            p.bias_sh = (ptrdiff_t)bsh;
            p.bias_sq = (ptrdiff_t)bsq;
        }
        const layout L = {fused != 0, fused ? 3 : 0, extra, false};
        int32_t *kv_len = NULL;
        snprintf(key, sizeof key, "attn.%d.kv_len", c);
        if (attn_st_find(f, key)) {
            assert_int_equal(attn_st_load_i32(f, key, &kv_len, NULL), ATTN_STATUS_OK);
            p.kv_len = kv_len;
        }
        outs ref;
        float *q = load_f32(f, c, "q", true), *k = load_f32(f, c, "k", true);
        float *v = load_f32(f, c, "v", true), *dO = load_f32(f, c, "do", true);
        ref.o = load_f32(f, c, "o", true);
        ref.lse = load_f32(f, c, "lse", true);
        ref.probs = load_f32(f, c, "probs", false);
        ref.dq = load_f32(f, c, "dq", true);
        ref.dk = load_f32(f, c, "dk", true);
        ref.dv = load_f32(f, c, "dv", true);
        ref.dbias = has_bias ? load_f32(f, c, "dbias", true) : NULL;
        printf("case %d: %s\n", c, meta);
        assert_int_equal(attn_set_backend(ALL_BACKENDS[bi]), ATTN_STATUS_OK);
        outs got;
        outs_alloc(&got, &p, ref.probs != NULL, has_bias);
        attn_status s = run_attention(&p, &L, q, k, v, dO, &got);
        if (s) fail_msg("case %d %s: %s", c, attn_backend_name(ALL_BACKENDS[bi]),
                        attn_last_error());
        compare(bi, attn_backend_name(ALL_BACKENDS[bi]), &p, &got, &ref, ref.probs != NULL,
                has_bias, 1.0);
        outs_free(&got);
        attn_free(q);
        attn_free(k);
        attn_free(v);
        attn_free(dO);
        attn_free(ref.o);
        attn_free(ref.lse);
        attn_free(ref.probs);
        attn_free(ref.dq);
        attn_free(ref.dk);
        attn_free(ref.dv);
        attn_free(ref.dbias);
        attn_free(bias);
        attn_free(kv_len);
    }
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
    assert_true(ncases > 0);
    printf("worst relative error (max|err| / max|ref|; gradients: / the case's largest gradient)\n"
           "over %d cases vs PyTorch float64:\n",
           ncases);
    printf("  %-8s", "backend");
    for (int i = 0; i < NQ; i++) printf(" %9s", QNAMES[i]);
    printf("\n");
    printf("  %-8s", attn_backend_name(ALL_BACKENDS[bi]));
    for (int i = 0; i < NQ; i++) printf(" %9.2e", worst[bi][i]);
    printf("\n  %-8s", "windows");
    for (int i = 0; i < NQ; i++) printf(" %9.2e", worst_window[bi][i]);
    printf("  (the sliding-window cases alone)\n");
}
PER_BACKEND(vs_torch)

/* ---- 2. central differences on the reference path --------------------------------------------- */

/* L = Σ G ∘ o, accumulated in double. */
static double loss(const attn_attention_params *p, const float *q, const float *k,
                   const float *v, const float *g, float *o) {
    assert_int_equal(attn_attention_forward(p, q, k, v, o, NULL, NULL), ATTN_STATUS_OK);
    double s = 0;
    for (size_t i = 0; i < (size_t)p->B * p->Tq * p->H * p->D; i++) s += (double)g[i] * o[i];
    return s;
}

/* The reference path's dq, dk, dv (and dbias with nb > 0 bias entries: the bias buffer is
 * dense (B, H, Tq, Tk) here) against central differences of loss(). */
static void gradcheck_ref(attn_attention_params p, float *bias, size_t nb, uint64_t seed) {
    const size_t nq = (size_t)p.B * p.Tq * p.H * p.D, nk = (size_t)p.B * p.Tk * kv_heads(&p) * p.D;
    float *x[4], *grad[4], *fd[4], *g = malloc(sizeof(float) * nq), *o = malloc(sizeof(float) * nq);
    float *lse = malloc(sizeof(float) * p.B * p.H * p.Tq);
    size_t n[4] = {nq, nk, nk, nb};
    const int nt = nb ? 4 : 3;
    tu_rng rng = {seed};
    for (int i = 0; i < nt; i++) {
        x[i] = i == 3 ? bias : malloc(sizeof(float) * n[i]);
        grad[i] = malloc(sizeof(float) * n[i]);
        fd[i] = malloc(sizeof(float) * n[i]);
        if (i < 3) tu_fill(&rng, x[i], n[i], -1.5f, 1.5f);
    }
    tu_fill(&rng, g, nq, -1.0f, 1.0f);
    p.bias = nb ? bias : NULL;
    p.dbias = nb ? grad[3] : NULL;
    assert_int_equal(attn_attention_forward(&p, x[0], x[1], x[2], o, lse, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_attention_backward(&p, x[0], x[1], x[2], o, lse, g, grad[0], grad[1],
                                             grad[2]),
                     ATTN_STATUS_OK);
    const float h = 4e-3f;
    for (int t = 0; t < nt; t++)
        for (size_t i = 0; i < n[t]; i++) {
            const float keep = x[t][i];
            if (isinf(keep)) { /* a -inf bias entry: no gradient */
                fd[t][i] = 0.0f;
                continue;
            }
            x[t][i] = keep + h;
            const float hp = x[t][i] - keep; /* the step actually taken in float */
            double lp = loss(&p, x[0], x[1], x[2], g, o);
            x[t][i] = keep - h;
            const float hm = keep - x[t][i];
            double lm = loss(&p, x[0], x[1], x[2], g, o);
            x[t][i] = keep;
            fd[t][i] = (float)((lp - lm) / ((double)hp + hm));
        }
    static const char *const names[4] = {"dq", "dk", "dv", "dbias"};
    for (int t = 0; t < nt; t++) {
        char what[64];
        snprintf(what, sizeof what, "ref %s (H_kv=%d) vs central differences", names[t],
                 kv_heads(&p));
        tu_close(what, grad[t], fd[t], n[t], RTOL_FD, 0);
    }
    for (int i = 0; i < nt; i++) {
        if (i < 3) free(x[i]);
        free(grad[i]);
        free(fd[i]);
    }
    free(g);
    free(o);
    free(lse);
}

static void test_gradcheck_ref(void **state) {
    (void)state;
    assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
    /* Tiny, with every mask at once: causal with offset 1, key padding, one empty query. */
    attn_attention_params p = attn_attention_default_params(2, 2, 3, 5, 4);
    int32_t kv_len[2] = {4, 5};
    p.causal = true;
    p.causal_offset = 1;
    p.kv_len = kv_len;
    p.scale = 0.7f;
    gradcheck_ref(p, NULL, 0, 0x9e3779b97f4a7c15ull);
    /* The same masks with multi-query heads (H = 2, H_kv = 1: dk, dv summed over both heads)
     * and a dense bias with -inf entries: one where the causal mask hides the key anyway, one
     * among visible keys, and two that hide both keys query 0 of (b 1, h 1) can see. */
    p.H_kv = 1;
    p.ldk = p.ldv = p.D;
    const size_t nb = (size_t)p.B * p.H * p.Tq * p.Tk;
    float *bias = malloc(sizeof(float) * nb);
    tu_rng rb = {4242};
    tu_fill(&rb, bias, nb, -1.0f, 1.0f);
    bias[3] = bias[11] = -INFINITY; /* (b, h, i, j) = (0, 0, 0, 3) and (0, 0, 2, 1) */
    bias[(((size_t)1 * p.H + 1) * p.Tq + 0) * p.Tk + 0] = -INFINITY;
    bias[(((size_t)1 * p.H + 1) * p.Tq + 0) * p.Tk + 1] = -INFINITY;
    p.bias_sq = p.Tk;
    p.bias_sh = (ptrdiff_t)p.Tq * p.Tk;
    p.bias_sb = (ptrdiff_t)p.H * p.Tq * p.Tk;
    gradcheck_ref(p, bias, nb, 0x51ed270b27a4b1c3ull);
    free(bias);
    /* A sliding window of 2 over a cache offset (query i sees keys i .. i + 1 of 5, within
     * kv_len), with GQA. */
    p.bias = NULL;
    p.window = 2;
    gradcheck_ref(p, NULL, 0, 0x2545f4914f6cdd1dull);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ---- 3. SIMD against the reference over random shapes ------------------------------------------ */

static int rand_int(tu_rng *r, int lo, int hi) { /* [lo, hi] */
    return lo + (int)(tu_uniform(r, 0.0f, 1.0f) * (float)(hi - lo + 1)) % (hi - lo + 1);
}

/* A random score bias for p (B, H, Tq, Tk), drawn from r: none (NULL), or one of
 *   dense (Bb, Hb, Tqb, Tk) with each of Bb, Hb, Tqb either full or 1 (stride 0: shared),
 *   a relative-position vector (Hb, Tq + Tk - 1) read as a Toeplitz matrix (bias_sq = -1),
 * with finite N(0, ~2) entries, a random fraction of -inf entries (up to 60%) and sometimes whole
 * -inf rows. Sets p->bias and its strides; returns the allocation to free. */
static float *random_bias(tu_rng *r, attn_attention_params *p) {
    const int kind = rand_int(r, 0, 3); /* 0: none, 1, 2: dense, 3: relative */
    if (kind == 0) return NULL;
    const bool fb = rand_int(r, 0, 1), fh = rand_int(r, 0, 1);
    const int Bb = fb ? p->B : 1, Hb = fh ? p->H : 1;
    size_t rowlen, rows; /* the allocation: rows × rowlen */
    if (kind < 3) {
        const int Tqb = rand_int(r, 0, 3) ? p->Tq : 1;
        rowlen = (size_t)p->Tk;
        rows = (size_t)Bb * Hb * Tqb;
        p->bias_sq = Tqb == 1 ? 0 : p->Tk;
        p->bias_sh = Hb == 1 ? 0 : (ptrdiff_t)Tqb * p->Tk;
        p->bias_sb = Bb == 1 ? 0 : (ptrdiff_t)Hb * Tqb * p->Tk;
    } else {
        rowlen = (size_t)p->Tq + p->Tk - 1;
        rows = (size_t)Bb * Hb;
        p->bias_sq = -1;
        p->bias_sh = Hb == 1 ? 0 : (ptrdiff_t)rowlen;
        p->bias_sb = Bb == 1 ? 0 : (ptrdiff_t)Hb * rowlen;
    }
    const size_t n = rows * rowlen;
    float *bias = malloc(sizeof(float) * n);
    const float ninf = rand_int(r, 0, 2) ? 0.0f : tu_uniform(r, 0.0f, 0.6f);
    for (size_t i = 0; i < n; i++)
        bias[i] = tu_uniform(r, 0.0f, 1.0f) < ninf ? -INFINITY : tu_uniform(r, -3.5f, 3.5f);
    if (kind < 3 && rand_int(r, 0, 1)) /* a few whole -inf rows */
        for (int k = 0; k < 3; k++) fill(bias + (size_t)rand_int(r, 0, (int)rows - 1) * rowlen, rowlen, -INFINITY);
    p->bias = kind < 3 ? bias : bias + p->Tq - 1;
    return bias;
}

static void simd_vs_ref_random(int bi) {
    tu_need_backend(ALL_BACKENDS[bi]);
    static const int DS[] = {1, 3, 8, 16, 20, 32, 36, 48, 64, 72, 80, 96, 100, 128, 136, 200, 256, 264};
    /* rng draws the shapes, masks and data as before GQA, strides and bias existed; rng2 draws
     * those (about a third of the draws leave all three off, which reproduces an older draw). */
    tu_rng rng = {12345}, rng2 = {67890}, rng3 = {24680}; /* rng3: sliding windows */
    /* Under valgrind: 15 shapes of at most 5e5 B*H*Tq*Tk*D (60 of 4e6 otherwise). */
    const int iters = tu_valgrind() ? 15 : 60;
    const double max_cost = tu_valgrind() ? 5e5 : 4e6;
    for (int it = 0; it < iters; it++) {
        const int D = DS[rand_int(&rng, 0, (int)(sizeof DS / sizeof DS[0]) - 1)];
        const int B = rand_int(&rng, 1, 3), H = rand_int(&rng, 1, 4);
        int Tq = rand_int(&rng, 1, it % 4 == 0 ? 300 : 90);
        int Tk = rand_int(&rng, 0, 1) ? Tq : rand_int(&rng, 1, 150);
        /* Bound the reference's cost. */
        while ((double)B * H * Tq * Tk * D > max_cost && (Tq > 1 || Tk > 1)) {
            if (Tq > 1) Tq = Tq * 2 / 3;
            if (Tk > 1) Tk = Tk * 2 / 3;
        }
        attn_attention_params p = attn_attention_default_params(B, H, Tq, Tk, D);
        p.causal = rand_int(&rng, 0, 1);
        p.causal_offset = p.causal ? rand_int(&rng, -4, Tk > Tq ? Tk - Tq + 2 : 2) : 0;
        if (rand_int(&rng, 0, 3) == 0) p.scale = tu_uniform(&rng, 0.05f, 1.5f);
        int32_t kv_len[3];
        if (rand_int(&rng, 0, 1)) {
            for (int b = 0; b < B; b++) kv_len[b] = rand_int(&rng, 0, Tk);
            p.kv_len = kv_len;
        }
        layout L = {Tq == Tk && rand_int(&rng, 0, 1), 0, 0, false};
        L.pad = rand_int(&rng, 0, 1) ? rand_int(&rng, 1, 17) : 0;
        const bool plain = rand_int(&rng2, 0, 2) == 0;
        float *bias = NULL;
        if (!plain) {
            if (rand_int(&rng2, 0, 1)) { /* H_kv: a random divisor of H */
                int hk;
                do hk = rand_int(&rng2, 1, H);
                while (H % hk);
                p.H_kv = hk;
            }
            if (rand_int(&rng2, 0, 1)) L.extra = rand_int(&rng2, 1, 20);
            L.reverse = rand_int(&rng2, 0, 3) == 0;
            bias = random_bias(&rng2, &p);
        }
        /* A sliding window on about half the causal draws: 1 .. a bit past the longest reach. */
        if (p.causal && rand_int(&rng3, 0, 1))
            p.window = rand_int(&rng3, 0, 2) ? rand_int(&rng3, 1, 80) : rand_int(&rng3, 1, Tk + 8);
        /* k, v are drawn at H heads (the old draw), of which the first H_kv·D columns' worth of
         * values are used. */
        const size_t nq = (size_t)B * Tq * H * D, nk = (size_t)B * Tk * H * D;
        float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
        float *v = malloc(sizeof(float) * nk), *dO = malloc(sizeof(float) * nq);
        tu_fill(&rng, q, nq, -2.0f, 2.0f);
        tu_fill(&rng, k, nk, -2.0f, 2.0f);
        tu_fill(&rng, v, nk, -1.0f, 1.0f);
        tu_fill(&rng, dO, nq, -1.0f, 1.0f);
        const bool probs = rand_int(&rng, 0, 1);
        const bool dbias = bias && rand_int(&rng2, 0, 3);
        outs ref;
        outs_alloc(&ref, &p, probs, dbias);
        assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
        assert_int_equal(run_attention(&p, &L, q, k, v, dO, &ref), ATTN_STATUS_OK);
        printf("random %2d: B=%d H=%d H_kv=%d Tq=%d Tk=%d D=%d scale=%.3g causal=%d off=%d "
               "window=%d kv_len=%s fused=%d pad=%d extra=%d reverse=%d bias=%s%s\n",
               it, B, H, kv_heads(&p), Tq, Tk, D, (double)p.scale, p.causal, p.causal_offset,
               p.window,
               p.kv_len ? "yes" : "no", L.fused, L.pad, L.extra, L.reverse,
               !bias ? "none" : p.bias_sq < 0 ? "relative" : "dense", dbias ? " +dbias" : "");
        assert_int_equal(attn_set_backend(ALL_BACKENDS[bi]), ATTN_STATUS_OK);
        outs got;
        outs_alloc(&got, &p, probs, dbias);
        assert_int_equal(run_attention(&p, &L, q, k, v, dO, &got), ATTN_STATUS_OK);
        char tag[32];
        snprintf(tag, sizeof tag, "%s vs ref", attn_backend_name(ALL_BACKENDS[bi]));
        compare(-1, tag, &p, &got, &ref, probs, dbias, RANDOM_LOOSE);
        outs_free(&got);
        outs_free(&ref);
        free(q);
        free(k);
        free(v);
        free(dO);
        free(bias);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(simd_vs_ref_random)

/* Decoding's few queries (Tq <= 4: the kernels' few-query path) against the tiled path, which a
 * zero score bias forces and which a zero bias leaves unchanged to the bit: o, lse, probabilities
 * (and the backward from them) must be bit-identical over random GQA groupings, KV-cache offsets,
 * windows, padding and head sizes, so a row's result never depends on how many rows its call has
 * (the translator's beams, generation with and without a prompt). */
static bool outs_equal(const attn_attention_params *p, const outs *a, const outs *b);

static void few_queries_exact(int bi) {
    tu_need_backend(ALL_BACKENDS[bi]);
    static const int DS[] = {8, 20, 32, 64, 72, 128, 136};
    tu_rng rng = {4242};
    const int iters = tu_valgrind() ? 8 : 40;
    assert_int_equal(attn_set_backend(ALL_BACKENDS[bi]), ATTN_STATUS_OK);
    int differ = 0, n16 = 0;
    for (int it = 0; it < iters; it++) {
        const int D = DS[rand_int(&rng, 0, (int)(sizeof DS / sizeof DS[0]) - 1)];
        const int B = rand_int(&rng, 1, 3), Tq = rand_int(&rng, 1, 4);
        int H = rand_int(&rng, 1, 8), hk;
        do hk = rand_int(&rng, 1, H);
        while (H % hk || (H / hk) * Tq > 32);
        const int Tk = rand_int(&rng, Tq, tu_valgrind() ? 80 : 300);
        attn_attention_params p = attn_attention_default_params(B, H, Tq, Tk, D);
        p.H_kv = hk;
        p.causal = rand_int(&rng, 0, 3) != 0;
        p.causal_offset = p.causal ? Tk - Tq - rand_int(&rng, 0, 2) : 0; /* a KV cache */
        if (p.causal && rand_int(&rng, 0, 1)) p.window = rand_int(&rng, 1, Tk + 4);
        int32_t kv_len[3];
        if (rand_int(&rng, 0, 2) == 0) {
            for (int b = 0; b < B; b++) kv_len[b] = rand_int(&rng, 0, Tk);
            p.kv_len = kv_len;
        }
        const size_t nq = (size_t)B * Tq * H * D, nk = (size_t)B * Tk * H * D;
        const size_t nb = (size_t)B * H * Tq * Tk;
        float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
        float *v = malloc(sizeof(float) * nk), *dO = malloc(sizeof(float) * nq);
        float *zero = calloc(nb, sizeof(float));
        tu_fill(&rng, q, nq, -2.0f, 2.0f);
        tu_fill(&rng, k, nk, -2.0f, 2.0f);
        tu_fill(&rng, v, nk, -1.0f, 1.0f);
        tu_fill(&rng, dO, nq, -1.0f, 1.0f);
        /* keys and values that binary16 holds exactly (a cache that rounds to it): then their
         * binary16 copies (kt16, v16) must give the same bits again */
        const bool f16 = rand_int(&rng, 0, 1);
        if (f16)
            for (size_t i = 0; i < nk; i++) {
                k[i] = attn_quant_f16_to_f32(attn_quant_f32_to_f16(k[i]));
                v[i] = attn_quant_f16_to_f32(attn_quant_f32_to_f16(v[i]));
            }
        const bool probs = rand_int(&rng, 0, 1);
        outs few, tiled, trans;
        outs_alloc(&few, &p, probs, false);
        assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &few), ATTN_STATUS_OK);
        /* the same with the keys also given transposed (a decoding cache's kt): same bits */
        const int kd = hk * D;
        const ptrdiff_t ldkt = Tk + 16 + rand_int(&rng, 0, 5);
        float *kt = malloc(sizeof(float) * ((size_t)B * kd * ldkt));
        tu_fill(&rng, kt, (size_t)B * kd * ldkt, -1e30f, 1e30f); /* unused columns: junk */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tk; t++)
                for (int c = 0; c < kd; c++)
                    kt[((size_t)b * kd + c) * ldkt + t] = k[((size_t)b * Tk + t) * kd + c];
        p.kt = kt, p.ldkt = ldkt, p.sbkt = rand_int(&rng, 0, 1) ? 0 : (ptrdiff_t)kd * ldkt;
        outs_alloc(&trans, &p, probs, false);
        assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &trans), ATTN_STATUS_OK);
        p.kt = NULL;
        if (!outs_equal(&p, &few, &trans)) {
            printf("  transposed keys differ: B=%d H=%d H_kv=%d Tq=%d Tk=%d D=%d\n", B, H, hk,
                   Tq, Tk, D);
            differ++;
        }
        outs_free(&trans);
        if (f16) { /* the binary16 copies: keys transposed as kt (junk columns), values as V */
            uint16_t *kt16 = malloc(sizeof(uint16_t) * ((size_t)B * kd * ldkt));
            uint16_t *v16 = malloc(sizeof(uint16_t) * nk);
            for (size_t i = 0; i < (size_t)B * kd * ldkt; i++)
                kt16[i] = attn_quant_f32_to_f16(kt[i] > 6e4f || kt[i] < -6e4f ? 1.5f : kt[i]);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < Tk; t++)
                    for (int c = 0; c < kd; c++)
                        kt16[((size_t)b * kd + c) * ldkt + t] =
                            attn_quant_f32_to_f16(k[((size_t)b * Tk + t) * kd + c]);
            for (size_t i = 0; i < nk; i++) v16[i] = attn_quant_f32_to_f16(v[i]);
            p.kt16 = kt16, p.v16 = v16;
            outs_alloc(&trans, &p, probs, false);
            assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &trans), ATTN_STATUS_OK);
            p.kt16 = NULL, p.v16 = NULL;
            if (!outs_equal(&p, &few, &trans)) {
                printf("  binary16 copies differ: B=%d H=%d H_kv=%d Tq=%d Tk=%d D=%d\n", B, H,
                       hk, Tq, Tk, D);
                differ++;
            }
            outs_free(&trans);
            free(kt16), free(v16);
            n16++;
        }
        free(kt);
        p.bias = zero, p.bias_sq = Tk, p.bias_sh = (ptrdiff_t)Tq * Tk;
        p.bias_sb = (ptrdiff_t)H * Tq * Tk;
        outs_alloc(&tiled, &p, probs, false);
        assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &tiled), ATTN_STATUS_OK);
        if (!outs_equal(&p, &few, &tiled)) {
            printf("  few queries differ from the tiled path: B=%d H=%d H_kv=%d Tq=%d Tk=%d "
                   "D=%d causal=%d off=%d window=%d kv_len=%s probs=%d\n",
                   B, H, hk, Tq, Tk, D, p.causal, p.causal_offset, p.window,
                   p.kv_len ? "yes" : "no", probs);
            differ++;
        }
        outs_free(&few);
        outs_free(&tiled);
        free(q), free(k), free(v), free(dO), free(zero);
    }
    printf("few queries vs tiled, backend %s: %d of %d draws bit-identical (%d with binary16 "
           "copies of K and V)\n",
           attn_backend_name(ALL_BACKENDS[bi]), iters - differ, iters, n16);
    assert_int_equal(differ, 0);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(few_queries_exact)

/* ---- 4. properties ---------------------------------------------------------------------------- */

/* max |a - b| over rows [r0, r1) of (B, T, H·D) tensors, for batch b. */
static double row_diff(const float *a, const float *bb, int T, int hd, int b, int r0, int r1) {
    double m = 0;
    for (int t = r0; t < r1; t++)
        for (int c = 0; c < hd; c++) {
            size_t i = ((size_t)b * T + t) * hd + c;
            double e = fabs((double)a[i] - bb[i]);
            if (e > m || e != e) m = e;
        }
    return m;
}

/* Random q (nq), k, v (nk) and dO (nq) from r, drawn in that order: q, k in [-2, 2), v, dO in
 * [-1, 1). Free with inputs_free. */
typedef struct {
    float *q, *k, *v, *dO;
} inputs;
static inputs inputs_draw(tu_rng *r, size_t nq, size_t nk) {
    inputs in = {malloc(sizeof(float) * nq), malloc(sizeof(float) * nk),
                 malloc(sizeof(float) * nk), malloc(sizeof(float) * nq)};
    tu_fill(r, in.q, nq, -2, 2);
    tu_fill(r, in.k, nk, -2, 2);
    tu_fill(r, in.v, nk, -1, 1);
    tu_fill(r, in.dO, nq, -1, 1);
    return in;
}
static void inputs_free(inputs *in) {
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->dO);
}

static void check(bool ok, const char *fmt, ...) {
    if (ok) return;
    va_list ap;
    va_start(ap, fmt);
    printf("  FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    tu_failures++;
}

static void properties(int bi) {
    tu_need_backend(ALL_BACKENDS[bi]);
    const int B = 2, H = 2, T = 70, D = 24, hd = H * D, cut = 37;
    const size_t n = (size_t)B * T * hd;
    tu_rng rng = {777};
    inputs in = inputs_draw(&rng, n, n);
    const float *q = in.q, *k = in.k, *v = in.v, *dO = in.dO;
    float *q2 = malloc(sizeof(float) * n), *k2 = malloc(sizeof(float) * n);
    float *v2 = malloc(sizeof(float) * n);
    /* q2, k2, v2: the same, except every token after position `cut`. */
    memcpy(q2, q, sizeof(float) * n);
    memcpy(k2, k, sizeof(float) * n);
    memcpy(v2, v, sizeof(float) * n);
    for (int b = 0; b < B; b++)
        for (int t = cut + 1; t < T; t++)
            for (int c = 0; c < hd; c++) {
                size_t i = ((size_t)b * T + t) * hd + c;
                q2[i] += 0.5f;
                k2[i] -= 0.7f;
                v2[i] *= -2.0f;
            }
    assert_int_equal(attn_set_backend(ALL_BACKENDS[bi]), ATTN_STATUS_OK);
    const char *name = attn_backend_name(ALL_BACKENDS[bi]);
    printf("properties, backend %s\n", name);
    attn_attention_params p = attn_attention_default_params(B, H, T, T, D);
    outs r1, r2;
    /* Causal: rows <= cut ignore later tokens. */
    p.causal = true;
    outs_alloc(&r1, &p, true, false);
    outs_alloc(&r2, &p, true, false);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
    assert_int_equal(run_attention(&p, &PACKED, q2, k2, v2, dO, &r2), ATTN_STATUS_OK);
    for (int b = 0; b < B; b++) {
        double d = row_diff(r1.o, r2.o, T, hd, b, 0, cut + 1);
        check(d == 0, "%s causal: rows <= %d changed by %g when later tokens changed", name,
              cut, d);
        d = row_diff(r1.o, r2.o, T, hd, b, cut + 1, T);
        check(d > 1e-3, "%s causal: rows > %d did not change (%g)", name, cut, d);
    }
    /* Probabilities: rows sum to 1; entries above the diagonal are exactly 0. */
    double worst_sum = 0;
    size_t nonzero_masked = 0;
    for (size_t r = 0; r < (size_t)B * H * T; r++) {
        const int i = (int)(r % T);
        double s = 0;
        for (int j = 0; j < T; j++) {
            s += r1.probs[r * T + j];
            nonzero_masked += j > i && r1.probs[r * T + j] != 0.0f;
        }
        if (fabs(s - 1) > worst_sum) worst_sum = fabs(s - 1);
    }
    printf("  %s: max |row sum of probs - 1| = %.2e\n", name, worst_sum);
    check(worst_sum < 1e-5, "%s: probability rows sum to 1 within %g", name, worst_sum);
    check(nonzero_masked == 0, "%s: %zu masked probabilities are not 0", name,
          nonzero_masked);
    outs_free(&r1);
    outs_free(&r2);

    /* No mask: rows <= cut do change when later tokens change. */
    p.causal = false;
    outs_alloc(&r1, &p, false, false);
    outs_alloc(&r2, &p, false, false);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
    assert_int_equal(run_attention(&p, &PACKED, q2, k2, v2, dO, &r2), ATTN_STATUS_OK);
    double d = row_diff(r1.o, r2.o, T, hd, 0, 0, cut + 1);
    check(d > 1e-3, "%s unmasked: rows <= %d did not change (%g)", name, cut, d);
    outs_free(&r1);
    outs_free(&r2);

    /* Key padding: keys >= kv_len (here: tokens after cut, in k2/v2) change nothing, get
     * zero gradients; batch 1 has no keys at all: o = 0, lse = -inf, gradients 0. */
    int32_t kv_len[2] = {cut + 1, 0};
    p.kv_len = kv_len;
    outs_alloc(&r1, &p, true, false);
    outs_alloc(&r2, &p, true, false);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
    assert_int_equal(run_attention(&p, &PACKED, q, k2, v2, dO, &r2), ATTN_STATUS_OK);
    d = row_diff(r1.o, r2.o, T, hd, 0, 0, T);
    check(d == 0, "%s padding: outputs changed by %g when padded keys changed", name, d);
    d = row_diff(r1.dq, r2.dq, T, hd, 0, 0, T);
    check(d == 0, "%s padding: dq changed by %g when padded keys changed", name, d);
    float *zero = calloc(n, sizeof(float));
    d = row_diff(r1.dk, zero, T, hd, 0, cut + 1, T) + row_diff(r1.dv, zero, T, hd, 0, cut + 1, T);
    check(d == 0, "%s padding: padded keys have gradient %g", name, d);
    d = row_diff(r1.o, zero, T, hd, 1, 0, T) + row_diff(r1.dq, zero, T, hd, 1, 0, T) +
        row_diff(r1.dk, zero, T, hd, 1, 0, T) + row_diff(r1.dv, zero, T, hd, 1, 0, T);
    check(d == 0, "%s: the batch with kv_len 0 has nonzero o or gradients (%g)", name, d);
    size_t bad = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            float l = r1.lse[((size_t)1 * H + h) * T + t];
            bad += !(isinf(l) && l < 0);
            for (int j = 0; j < T; j++) bad += r1.probs[(((size_t)1 * H + h) * T + t) * T + j] != 0;
        }
    check(bad == 0, "%s: %zu lse/probs entries of the empty batch are not -inf/0", name, bad);
    free(zero);
    outs_free(&r1);
    outs_free(&r2);
    inputs_free(&in);
    free(q2);
    free(k2);
    free(v2);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(properties)

/* Whether every result of a and b is bit-identical (probs and dbias where both have them). */
static bool outs_equal(const attn_attention_params *p, const outs *a, const outs *b) {
    const size_t nq = (size_t)p->B * p->Tq * p->H * p->D;
    const size_t nk = (size_t)p->B * p->Tk * kv_heads(p) * p->D;
    const size_t nl = (size_t)p->B * p->H * p->Tq, np = nl * p->Tk;
    bool eq = memcmp(a->o, b->o, sizeof(float) * nq) == 0 &&
              memcmp(a->lse, b->lse, sizeof(float) * nl) == 0 &&
              memcmp(a->dq, b->dq, sizeof(float) * nq) == 0 &&
              memcmp(a->dk, b->dk, sizeof(float) * nk) == 0 &&
              memcmp(a->dv, b->dv, sizeof(float) * nk) == 0;
    if (a->probs && b->probs) eq = eq && memcmp(a->probs, b->probs, sizeof(float) * np) == 0;
    if (a->dbias && b->dbias) eq = eq && memcmp(a->dbias, b->dbias, sizeof(float) * np) == 0;
    return eq;
}

/* GQA, batch strides and the bias: layouts that must not change a single bit, and masks. */
static void layout_bias_properties(int bi) {
    tu_need_backend(ALL_BACKENDS[bi]);
    const int B = 2, H = 4, T = 70, D = 24;
    const size_t n = (size_t)B * T * H * D, nb = (size_t)B * H * T * T;
    tu_rng rng = {31337};
    inputs in = inputs_draw(&rng, n, n);
    const float *q = in.q, *k = in.k, *v = in.v, *dO = in.dO;
    float *zero = calloc(nb, sizeof(float)), *mask = malloc(sizeof(float) * nb);
    /* mask: the causal mask as a bias (-inf above the diagonal), random finite values below. */
    for (size_t r = 0; r < (size_t)B * H * T; r++)
        for (int j = 0; j < T; j++)
            mask[r * T + j] = j > (int)(r % T) ? -INFINITY : tu_uniform(&rng, -2.0f, 2.0f);
    assert_int_equal(attn_set_backend(ALL_BACKENDS[bi]), ATTN_STATUS_OK);
    const char *name = attn_backend_name(ALL_BACKENDS[bi]);
    printf("layout and bias properties, backend %s\n", name);
    attn_attention_params p = attn_attention_default_params(B, H, T, T, D);
    p.causal = true;
    outs r0, r1;
    outs_alloc(&r0, &p, true, false);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r0), ATTN_STATUS_OK);
    /* The batch strides move base pointers only: a cache layout (NaN in the unused rows),
     * negative strides, H_kv = H spelled out: all bit-identical to the packed default. */
    static const layout LS[3] = {{false, 0, 13, false}, {false, 5, 0, true}, {true, 2, 7, true}};
    for (int li = 0; li < 3; li++) {
        outs_alloc(&r1, &p, true, false);
        p.H_kv = li == 2 ? H : 0;
        assert_int_equal(run_attention(&p, &LS[li], q, k, v, dO, &r1), ATTN_STATUS_OK);
        check(outs_equal(&p, &r0, &r1),
              "%s: layout %d (extra rows %d, reverse %d, fused %d) changes the results", name,
              li, LS[li].extra, LS[li].reverse, LS[li].fused);
        outs_free(&r1);
    }
    p.H_kv = 0;
    /* An all-zero bias changes nothing, to the bit; with dbias, the gradients are the same
     * bits as without, and dbias is 0 exactly where the mask hides a key. */
    p.bias = zero;
    p.bias_sq = T;
    p.bias_sh = (ptrdiff_t)T * T;
    p.bias_sb = 0; /* shared across the batch */
    for (int with_db = 0; with_db < 2; with_db++) {
        outs_alloc(&r1, &p, true, with_db);
        assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
        check(outs_equal(&p, &r0, &r1), "%s: a zero bias (dbias %d) changes the results",
              name, with_db);
        if (with_db) {
            size_t bad = 0, nonzero = 0;
            for (size_t r = 0; r < (size_t)B * H * T; r++)
                for (int j = 0; j < T; j++) {
                    bad += j > (int)(r % T) && r1.dbias[r * T + j] != 0.0f;
                    nonzero += j <= (int)(r % T) && r1.dbias[r * T + j] != 0.0f;
                }
            check(bad == 0, "%s: %zu masked dbias entries are not 0", name, bad);
            check(nonzero > nb / 4, "%s: only %zu visible dbias entries are nonzero", name,
                  nonzero);
        }
        outs_free(&r1);
    }
    /* The causal mask written as a -inf bias (plus finite values) == the causal flag with
     * the finite part as the bias: the kernels take different paths (full tiles of -inf
     * scores vs skipped ones) to the same values. Measured: bit-identical on ref, rounding
     * noise <= 2.4e-7 relative on avx2 (checked at the PyTorch tolerances). */
    outs_free(&r0);
    p.bias = mask;
    p.bias_sb = (ptrdiff_t)H * T * T;
    outs_alloc(&r0, &p, true, true);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r0), ATTN_STATUS_OK);
    p.causal = false;
    outs_alloc(&r1, &p, true, true);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
    char tag[64];
    snprintf(tag, sizeof tag, "%s bias mask vs causal", name);
    compare(-1, tag, &p, &r1, &r0, true, true, 1.0);
    outs_free(&r0);
    outs_free(&r1);
    inputs_free(&in);
    free(zero);
    free(mask);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(layout_bias_properties)

/* Sliding windows: a window covering every key is no window, to the bit; keys that fell out of
 * a query's window change nothing for it, to the bit; masked probabilities and dbias are exactly
 * 0; the window as a -inf bias gives the window's results (the kernels skip whole key tiles for
 * the one and compute -inf scores for the other). */
static void window_properties(int bi) {
    tu_need_backend(ALL_BACKENDS[bi]);
    /* Under valgrind 70 rows (still two query blocks, the second skipping key tiles). */
    const int B = 2, H = 4, Hk = 2, T = tu_valgrind() ? 70 : 150, D = 32, W = 23;
    const int cut = tu_valgrind() ? 20 : 40;
    const int hd = H * D, kd = Hk * D;
    const size_t nq = (size_t)B * T * hd, nk = (size_t)B * T * kd, nb = (size_t)B * H * T * T;
    tu_rng rng = {4711};
    inputs in = inputs_draw(&rng, nq, nk);
    const float *q = in.q, *k = in.k, *v = in.v, *dO = in.dO;
    float *k2 = malloc(sizeof(float) * nk), *v2 = malloc(sizeof(float) * nk);
    float *mask = malloc(sizeof(float) * nb);
    /* k2, v2: the same, except the keys and values of tokens before `cut`. */
    memcpy(k2, k, sizeof(float) * nk);
    memcpy(v2, v, sizeof(float) * nk);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < cut; t++)
            for (int c = 0; c < kd; c++) {
                const size_t i = ((size_t)b * T + t) * kd + c;
                k2[i] = -0.5f * k2[i] + 0.3f;
                v2[i] = 1.5f * v2[i] - 0.2f;
            }
    /* mask: the window as a bias (-inf for j <= i - W; the causal flag hides j > i), random
     * finite values inside the window. */
    for (size_t r = 0; r < (size_t)B * H * T; r++)
        for (int j = 0; j < T; j++)
            mask[r * T + j] = j <= (int)(r % T) - W ? -INFINITY : tu_uniform(&rng, -2.0f, 2.0f);
    assert_int_equal(attn_set_backend(ALL_BACKENDS[bi]), ATTN_STATUS_OK);
    const char *name = attn_backend_name(ALL_BACKENDS[bi]);
    printf("sliding-window properties, backend %s\n", name);
    attn_attention_params p = attn_attention_default_params(B, H, T, T, D);
    p.causal = true;
    p.H_kv = Hk;
    p.ldk = p.ldv = kd;
    outs r0, r1, r2;
    /* A window of T or more keys is no window. */
    outs_alloc(&r0, &p, true, false);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r0), ATTN_STATUS_OK);
    for (int w = T; w <= T + 100; w += 100) {
        p.window = w;
        outs_alloc(&r1, &p, true, false);
        assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
        check(outs_equal(&p, &r0, &r1), "%s: window %d >= T changes the results", name, w);
        outs_free(&r1);
    }
    outs_free(&r0);
    /* Window W: rows i >= cut + W - 1 see none of the changed tokens (bit-identical o, lse, dq);
     * rows cut .. cut + W - 2 do see some and change. */
    p.window = W;
    outs_alloc(&r1, &p, true, false);
    outs_alloc(&r2, &p, false, false);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
    assert_int_equal(run_attention(&p, &PACKED, q, k2, v2, dO, &r2), ATTN_STATUS_OK);
    for (int b = 0; b < B; b++) {
        double d = row_diff(r1.o, r2.o, T, hd, b, cut + W - 1, T) +
                   row_diff(r1.dq, r2.dq, T, hd, b, cut + W - 1, T);
        check(d == 0, "%s window: rows >= %d changed by %g when tokens < %d changed", name,
              cut + W - 1, d, cut);
        d = row_diff(r1.o, r2.o, T, hd, b, cut, cut + W - 1);
        check(d > 1e-3, "%s window: rows %d..%d did not change (%g)", name, cut, cut + W - 2, d);
    }
    size_t bad = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = cut + W - 1; t < T; t++)
                bad += memcmp(&r1.lse[((size_t)b * H + h) * T + t],
                              &r2.lse[((size_t)b * H + h) * T + t], sizeof(float)) != 0;
    check(bad == 0, "%s window: %zu lse entries of rows out of reach changed", name, bad);
    /* Probabilities: rows sum to 1, exactly 0 outside [i - W + 1, i]. */
    double worst_sum = 0;
    size_t nonzero_masked = 0;
    for (size_t r = 0; r < (size_t)B * H * T; r++) {
        const int i = (int)(r % T);
        double sum = 0;
        for (int j = 0; j < T; j++) {
            sum += r1.probs[r * T + j];
            nonzero_masked += (j > i || j <= i - W) && r1.probs[r * T + j] != 0.0f;
        }
        worst_sum = fmax(worst_sum, fabs(sum - 1));
    }
    printf("  %s: window %d: max |row sum of probs - 1| = %.2e\n", name, W, worst_sum);
    check(worst_sum < 1e-5, "%s window: probability rows sum to 1 within %g", name, worst_sum);
    check(nonzero_masked == 0, "%s window: %zu masked probabilities are not 0", name,
          nonzero_masked);
    outs_free(&r1);
    outs_free(&r2);
    /* The window as a -inf bias vs the window flag with the bias' finite part (dbias exactly 0
     * outside the window in both). */
    p.bias = mask;
    p.bias_sq = T;
    p.bias_sh = (ptrdiff_t)T * T;
    p.bias_sb = (ptrdiff_t)H * T * T;
    p.window = 0;
    outs_alloc(&r0, &p, true, true);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r0), ATTN_STATUS_OK);
    p.window = W;
    outs_alloc(&r1, &p, true, true);
    assert_int_equal(run_attention(&p, &PACKED, q, k, v, dO, &r1), ATTN_STATUS_OK);
    char tag[64];
    snprintf(tag, sizeof tag, "%s window vs -inf bias", name);
    compare(-1, tag, &p, &r1, &r0, true, true, 1.0);
    bad = 0;
    for (size_t r = 0; r < (size_t)B * H * T; r++)
        for (int j = 0; j < T; j++) {
            const int i = (int)(r % T);
            if (j > i || j <= i - W)
                bad += r0.dbias[r * T + j] != 0.0f || r1.dbias[r * T + j] != 0.0f;
        }
    check(bad == 0, "%s window: %zu dbias entries outside the window are not 0", name, bad);
    outs_free(&r0);
    outs_free(&r1);
    inputs_free(&in);
    free(k2);
    free(v2);
    free(mask);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(window_properties)

/* ---- 5. invalid parameters -------------------------------------------------------------------- */

static void expect_invalid(const attn_attention_params *p, const float *x, float *y,
                           const char *what) {
    float lse[64];
    attn_status s1 = attn_attention_forward(p, x, x, x, y, lse, NULL);
    attn_status s2 = attn_attention_backward(p, x, x, x, x, lse, x, y, y, y);
    if (s1 != ATTN_STATUS_INVALID_ARGUMENT || s2 != ATTN_STATUS_INVALID_ARGUMENT) {
        printf("  FAIL: %s: forward %s, backward %s (expected invalid argument)\n", what,
               attn_status_str(s1), attn_status_str(s2));
        tu_failures++;
    } else {
        printf("  %-28s -> invalid argument: %s\n", what, attn_last_error());
    }
}

static void test_bad_params(void **state) {
    (void)state;
    float x[512] = {0}, y[512];
    const attn_attention_params good = attn_attention_default_params(1, 2, 4, 4, 8);
    /* The good parameters do work (so the failures below are about the one change). */
    float lse[8];
    assert_int_equal(attn_attention_forward(&good, x, x, x, y, lse, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_attention_backward(&good, x, x, x, y, lse, x, y, y, y), ATTN_STATUS_OK);
    attn_attention_params p;
    expect_invalid(NULL, x, y, "NULL params");
#define BAD(field, val)                                                                          \
    p = good;                                                                                    \
    p.field = (val);                                                                             \
    expect_invalid(&p, x, y, #field " = " #val);
    BAD(B, 0)
    BAD(H, -1)
    BAD(Tq, 0)
    BAD(Tk, -3)
    BAD(D, 0)
    BAD(ldq, 15)
    BAD(ldk, 0)
    BAD(ldv, -16)
    BAD(ldo, 8)
    BAD(scale, NAN)
    BAD(scale, INFINITY)
    BAD(window, -1)
    BAD(window, 2) /* without causal */
#undef BAD
    int32_t kvl_neg[1] = {-1}, kvl_big[1] = {5};
    p = good;
    p.kv_len = kvl_neg;
    expect_invalid(&p, x, y, "kv_len = -1");
    p.kv_len = kvl_big;
    expect_invalid(&p, x, y, "kv_len = Tk + 1");
    /* H·D overflowing int. Built by hand: attn_attention_default_params computes H*D in int
     * itself (signed overflow there, which UBSan reports). */
    p = good;
    p.H = p.D = 65536; /* H·D = 2^32 */
    p.ldq = p.ldk = p.ldv = p.ldo = INT32_MAX;
    expect_invalid(&p, x, y, "H*D overflows int");
    p.H = p.D = 46341; /* H·D just above INT32_MAX */
    expect_invalid(&p, x, y, "H*D > INT32_MAX");
    /* NULL tensors. */
    attn_status s = attn_attention_forward(&good, NULL, x, x, y, NULL, NULL);
    check(s == ATTN_STATUS_INVALID_ARGUMENT, "NULL q accepted by forward");
    s = attn_attention_backward(&good, x, x, x, x, NULL, x, y, y, y);
    check(s == ATTN_STATUS_INVALID_ARGUMENT, "NULL lse accepted by backward");

    /* Grouped-query heads: H = 4 (rows of 32), K/V rows of H_kv·D. */
    float lse2[16]; /* (B, H, Tq) of good4 and good2 below */
    const attn_attention_params good4 = attn_attention_default_params(1, 4, 4, 4, 8);
    p = good4;
    p.H_kv = 2;
    p.ldk = p.ldv = 16; /* H_kv·D is enough for K and V */
    assert_int_equal(attn_attention_forward(&p, x, x, x, y, lse2, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_attention_backward(&p, x, x, x, y, lse2, x, y, y, y), ATTN_STATUS_OK);
#define BAD4(field, val)                                                                         \
    p = good4;                                                                                   \
    p.field = (val);                                                                             \
    expect_invalid(&p, x, y, #field " = " #val);
    BAD4(H_kv, -1)
    BAD4(H_kv, 3) /* does not divide H */
    BAD4(H_kv, 8) /* more K/V heads than query heads */
    p = good4;
    p.H_kv = 2;
    p.ldk = 15;
    expect_invalid(&p, x, y, "ldk < H_kv*D");
    p.ldk = 16;
    p.ldv = 12;
    expect_invalid(&p, x, y, "ldv < H_kv*D");
    p = good4;
    p.H_kv = 2;
    p.ldq = 16; /* ldq, ldo still need H·D */
    expect_invalid(&p, x, y, "ldq < H*D with H_kv");

    /* Batch strides: B = 2, T = 4, rows of 16 floats (H·D = 16). */
    const attn_attention_params good2 = attn_attention_default_params(2, 2, 4, 4, 8);
    p = good2;
    p.sbq = p.sbk = p.sbv = p.sbo = 64; /* the packed stride spelled out */
    assert_int_equal(attn_attention_forward(&p, x, x, x, y, lse2, NULL), ATTN_STATUS_OK);
    p.sbk = p.sbv = 128; /* a cache of capacity 8 */
    assert_int_equal(attn_attention_forward(&p, x, x, x, y, lse2, NULL), ATTN_STATUS_OK);
    p.sbq = p.sbo = -64; /* batch 1 below batch 0 */
    assert_int_equal(attn_attention_forward(&p, x + 64, x, x, y + 64, lse2, NULL),
                     ATTN_STATUS_OK);
#define BAD2(field, val)                                                                         \
    p = good2;                                                                                   \
    p.field = (val);                                                                             \
    expect_invalid(&p, x, y, #field " = " #val);
    BAD2(sbq, 63) /* (T-1)·ld + H·D = 64: batch 1's first row overlaps batch 0's last */
    BAD2(sbk, -63)
    BAD2(sbv, 1)
    BAD2(sbo, 16)
    BAD2(sbk, PTRDIFF_MAX / 2)
    BAD2(sbq, PTRDIFF_MIN)
    p = good2;
    p.H_kv = 1;
    p.ldk = p.ldv = 8;
    p.sbk = 31; /* (T-1)·ldk + H_kv·D = 32 */
    expect_invalid(&p, x, y, "sbk < (T-1)*ldk + H_kv*D");

    /* Bias: strides of any sign, the offsets must fit; dbias only with a bias. */
    p = good2;
    p.bias = x;
    p.bias_sb = 0;
    p.bias_sh = 16;
    p.bias_sq = 4;
    assert_int_equal(attn_attention_forward(&p, x, x, x, y, lse2, NULL), ATTN_STATUS_OK);
    p.dbias = y + 256;
    assert_int_equal(attn_attention_backward(&p, x, x, x, y, lse2, x, y, y, y), ATTN_STATUS_OK);
    p.bias_sq = -1;
    p.bias = x + 3; /* a relative-position vector of Tq + Tk - 1 = 7 */
    assert_int_equal(attn_attention_backward(&p, x, x, x, y, lse2, x, y, y, y), ATTN_STATUS_OK);
    p = good2;
    p.bias = x;
    p.bias_sh = PTRDIFF_MAX / 2;
    expect_invalid(&p, x, y, "bias_sh = PTRDIFF_MAX / 2");
    p.bias_sh = 0;
    p.bias_sq = PTRDIFF_MIN;
    expect_invalid(&p, x, y, "bias_sq = PTRDIFF_MIN");
    p = good2;
    p.kt = x, p.ldkt = p.Tk + 15; /* transposed keys: rows shorter than Tk + 16 */
    expect_invalid(&p, x, y, "ldkt = Tk + 15");
    p = good2;
    p.dbias = y;
    s = attn_attention_backward(&p, x, x, x, y, lse2, x, y, y, y);
    check(s == ATTN_STATUS_INVALID_ARGUMENT, "dbias without bias accepted by backward");
    printf("  %-28s -> %s: %s\n", "dbias without bias", attn_status_str(s), attn_last_error());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_torch_ref),
        cmocka_unit_test(test_vs_torch_avx2),
        cmocka_unit_test(test_vs_torch_avx512),
        cmocka_unit_test(test_gradcheck_ref),
        cmocka_unit_test(test_simd_vs_ref_random_avx2),
        cmocka_unit_test(test_simd_vs_ref_random_avx512),
        cmocka_unit_test(test_few_queries_exact_avx2),
        cmocka_unit_test(test_few_queries_exact_avx512),
        cmocka_unit_test(test_properties_ref),
        cmocka_unit_test(test_properties_avx2),
        cmocka_unit_test(test_properties_avx512),
        cmocka_unit_test(test_layout_bias_properties_ref),
        cmocka_unit_test(test_layout_bias_properties_avx2),
        cmocka_unit_test(test_layout_bias_properties_avx512),
        cmocka_unit_test(test_window_properties_ref),
        cmocka_unit_test(test_window_properties_avx2),
        cmocka_unit_test(test_window_properties_avx512),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

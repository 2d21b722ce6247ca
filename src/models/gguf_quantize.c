/* gguf_quantize.c — attn_gguf_quantize (include/attn_gguf_quantize.h): a decoder from a Hugging
 * Face directory or a GGUF file written as a GGUF file of a chosen type, with llama.cpp's
 * per-tensor type rules (src/llama-quant.cpp) and convert_hf_to_gguf.py's metadata and layout. */
#include "attn_gguf_quantize.h"
#include "attn_gguf.h"
#include "attn_gpt.h"
#include "attn_quant.h"

#include "../core/core-impl.h"
#include "config-impl.h"
#include "gpt-impl.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- file types ------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    attn_gguf_ftype ft;
    attn_gguf_dtype def;
} FTYPES[] = {
    {"F32", ATTN_GGUF_FTYPE_F32, ATTN_GGUF_DTYPE_F32},
    {"F16", ATTN_GGUF_FTYPE_F16, ATTN_GGUF_DTYPE_F16},
    {"BF16", ATTN_GGUF_FTYPE_BF16, ATTN_GGUF_DTYPE_BF16},
    {"Q8_0", ATTN_GGUF_FTYPE_Q8_0, ATTN_GGUF_DTYPE_Q8_0},
    {"Q4_0", ATTN_GGUF_FTYPE_Q4_0, ATTN_GGUF_DTYPE_Q4_0},
    {"Q4_1", ATTN_GGUF_FTYPE_Q4_1, ATTN_GGUF_DTYPE_Q4_1},
    {"Q5_0", ATTN_GGUF_FTYPE_Q5_0, ATTN_GGUF_DTYPE_Q5_0},
    {"Q5_1", ATTN_GGUF_FTYPE_Q5_1, ATTN_GGUF_DTYPE_Q5_1},
    {"Q4_K_S", ATTN_GGUF_FTYPE_Q4_K_S, ATTN_GGUF_DTYPE_Q4_K},
    {"Q4_K_M", ATTN_GGUF_FTYPE_Q4_K_M, ATTN_GGUF_DTYPE_Q4_K},
    {"Q5_K_S", ATTN_GGUF_FTYPE_Q5_K_S, ATTN_GGUF_DTYPE_Q5_K},
    {"Q5_K_M", ATTN_GGUF_FTYPE_Q5_K_M, ATTN_GGUF_DTYPE_Q5_K},
    {"Q6_K", ATTN_GGUF_FTYPE_Q6_K, ATTN_GGUF_DTYPE_Q6_K},
};
#define N_FTYPES (sizeof FTYPES / sizeof FTYPES[0])

attn_status attn_gguf_ftype_parse(const char *name, attn_gguf_ftype *out) {
    if (!name || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "quantize: NULL argument");
    const char *n = name;
    if (!strcasecmp(n, "q4_k")) n = "q4_k_m";
    if (!strcasecmp(n, "q5_k")) n = "q5_k_m";
    for (size_t i = 0; i < N_FTYPES; i++)
        if (!strcasecmp(n, FTYPES[i].name)) {
            *out = FTYPES[i].ft;
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "unknown type '%.64s' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_s, "
                     "q4_k_m, q5_k_s, q5_k_m, q6_k)",
                     name);
}

const char *attn_gguf_ftype_name(attn_gguf_ftype ft) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (FTYPES[i].ft == ft) return FTYPES[i].name;
    return NULL;
}

attn_gguf_dtype attn_gguf_ftype_default_type(attn_gguf_ftype ft) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (FTYPES[i].ft == ft) return FTYPES[i].def;
    return ATTN_GGUF_DTYPE_COUNT;
}

attn_gguf_quantize_params attn_gguf_quantize_default_params(void) {
    attn_gguf_quantize_params p;
    memset(&p, 0, sizeof p);
    p.ftype = ATTN_GGUF_FTYPE_Q8_0;
    return p;
}

/* ---- llama.cpp's type rules ------------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suf) {
    const size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* tensor_allows_quantization, for the tensors attn's decoders have */
static bool allows_quant(const char *name, int n_dims) {
    if (n_dims < 2) return false;
    if (!ends_with(name, "weight")) return false;
    if (strstr(name, "_norm.weight")) return false;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return false;
    return true;
}

static bool is_quantized(attn_gguf_dtype t) {
    return t != ATTN_GGUF_DTYPE_F32 && t != ATTN_GGUF_DTYPE_F16 && t != ATTN_GGUF_DTYPE_BF16;
}

static int64_t block_of(attn_gguf_dtype t) {
    uint32_t bs, ts;
    return attn_gguf_dtype_block(t, &bs, &ts) ? (int64_t)bs : 1;
}

static bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

attn_gguf_dtype attn_gguf_quantize_pick(const attn_gguf_quantize_params *p, const char *name,
                                        int n_dims, const int64_t *ne, attn_gguf_dtype cur,
                                        int n_layer, int n_attn_v, bool tied, int *i_attn_v,
                                        int *i_ffn_down) {
    if (!allows_quant(name, n_dims)) return cur;
    const attn_gguf_ftype ft = p->ftype;
    const attn_gguf_dtype def = attn_gguf_ftype_default_type(ft);
    attn_gguf_dtype t = def;
    if (!is_quantized(def)) return def;
    const bool output = !strcmp(name, "output.weight");
    const bool embd = !strcmp(name, "token_embd.weight");
    if (!p->pure) {
        if (output || (tied && embd)) {
            if (ne[0] % block_of(def) != 0)
                t = ATTN_GGUF_DTYPE_Q8_0;
            else if (def != ATTN_GGUF_DTYPE_Q8_0)
                t = ATTN_GGUF_DTYPE_Q6_K;
        } else if (embd) {
            /* untied token embeddings: the default type */
        } else if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_v.weight")) {
            if ((ft == ATTN_GGUF_FTYPE_Q4_K_M || ft == ATTN_GGUF_FTYPE_Q5_K_M) &&
                use_more_bits(*i_attn_v, n_attn_v))
                t = ATTN_GGUF_DTYPE_Q6_K;
            else if (ft == ATTN_GGUF_FTYPE_Q4_K_S && *i_attn_v < 4)
                t = ATTN_GGUF_DTYPE_Q5_K;
            ++*i_attn_v;
        } else if (strstr(name, "attn_k.weight") || strstr(name, "attn_q.weight") ||
                   strstr(name, "attn_output.weight") || strstr(name, "ffn_up") ||
                   strstr(name, "ffn_gate")) {
            /* no rule for attn's ftypes */
        } else if (strstr(name, "ffn_down")) {
            const int i = *i_ffn_down;
            if (ft == ATTN_GGUF_FTYPE_Q4_K_M || ft == ATTN_GGUF_FTYPE_Q5_K_M) {
                if (use_more_bits(i, n_layer)) t = ATTN_GGUF_DTYPE_Q6_K;
            } else if (ft == ATTN_GGUF_FTYPE_Q4_K_S && i < n_layer / 8) {
                t = ATTN_GGUF_DTYPE_Q5_K;
            }
            ++*i_ffn_down;
        }
    }
    /* tensor_type_fallback */
    if (ne[0] % block_of(t) != 0) {
        switch (t) {
        case ATTN_GGUF_DTYPE_Q4_K: t = ATTN_GGUF_DTYPE_Q5_0; break;
        case ATTN_GGUF_DTYPE_Q5_K: t = ATTN_GGUF_DTYPE_Q5_1; break;
        case ATTN_GGUF_DTYPE_Q6_K: t = ATTN_GGUF_DTYPE_Q8_0; break;
        default: break;
        }
        if (ne[0] % block_of(t) != 0) t = ATTN_GGUF_DTYPE_F16;
    }
    return t;
}

/* ---- the job: metadata and tensors to write --------------------------------------------------- */

typedef struct {
    char name[128];
    int n_dims;
    int64_t ne[ATTN_GGUF_MAX_DIMS];
    attn_gguf_dtype cur, dst;
    const void *bytes; /* the data in type cur (a GGUF input), or NULL */
    const float *f;    /* or float32 data (a directory's model, or owned) */
} qt_tensor;

typedef struct {
    attn_gguf_kv *kv;
    size_t n_kv, cap_kv;
    void **own;
    size_t n_own, cap_own;
    qt_tensor *t;
    size_t n_t, cap_t;
    int n_layer;
} job;

static attn_status oom(void) { return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "quantize: out of memory"); }

static attn_status grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return ATTN_STATUS_OK;
    size_t c = *cap ? 2 * *cap : 64;
    void *q = realloc(*p, c * elem);
    if (!q) return oom();
    *p = q, *cap = c;
    return ATTN_STATUS_OK;
}

/* Take ownership of p (freed with the job); NULL p is out of memory. */
static attn_status own(job *j, void *p) {
    if (!p) return oom();
    attn_status s = grow((void **)&j->own, &j->cap_own, j->n_own, sizeof(void *));
    if (s) {
        free(p);
        return s;
    }
    j->own[j->n_own++] = p;
    return ATTN_STATUS_OK;
}

static char *own_str(job *j, const char *s) {
    char *d = strdup(s);
    return own(j, d) ? NULL : d;
}

/* Append (or replace: removed, then appended, as ggml's gguf_set_val) a key. */
static attn_status kv_set(job *j, attn_gguf_kv kv) {
    for (size_t i = 0; i < j->n_kv; i++)
        if (!strcmp(j->kv[i].key, kv.key)) {
            memmove(&j->kv[i], &j->kv[i + 1], (j->n_kv - i - 1) * sizeof *j->kv);
            j->n_kv--;
            break;
        }
    ATTN_TRY(grow((void **)&j->kv, &j->cap_kv, j->n_kv, sizeof *j->kv));
    j->kv[j->n_kv++] = kv;
    return ATTN_STATUS_OK;
}

/* ARCH.key (the key string owned by the job) */
static const char *akey(job *j, const char *arch, const char *key) {
    char b[160];
    snprintf(b, sizeof b, "%s.%s", arch, key);
    return own_str(j, b);
}

static attn_status add_tensor(job *j, const char *name, int n_dims, const int64_t *ne,
                              attn_gguf_dtype cur, const void *bytes, const float *f) {
    ATTN_TRY(grow((void **)&j->t, &j->cap_t, j->n_t, sizeof *j->t));
    qt_tensor *t = &j->t[j->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    for (int d = 0; d < ATTN_GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->cur = cur, t->bytes = bytes, t->f = f;
    return ATTN_STATUS_OK;
}

static void job_free(job *j) {
    for (size_t i = 0; i < j->n_own; i++) free(j->own[i]);
    free(j->own);
    free(j->kv);
    free(j->t);
}

/* llama.cpp's weight_name_comparer: block -1 (none) first, then by block, then by name */
static int layer_of(const char *n) {
    int l = -1;
    if (sscanf(n, "blk.%d.", &l) != 1) l = -1;
    return l;
}

static int cmp_tensor(const void *a, const void *b) {
    const qt_tensor *x = a, *y = b;
    const int lx = layer_of(x->name), ly = layer_of(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* ---- from a GGUF file ------------------------------------------------------------------------ */

static attn_status from_gguf(job *j, const attn_gguf *g) {
    const char *name = attn_gguf_name(g);
    for (size_t i = 0; i < attn_gguf_kv_count(g); i++) ATTN_TRY(kv_set(j, *attn_gguf_kv_at(g, i)));
    const char *arch = NULL;
    ATTN_TRY(attn_gguf_get_str(g, "general.architecture", &arch, NULL));
    char key[160];
    snprintf(key, sizeof key, "%s.block_count", arch);
    int64_t L = 0;
    ATTN_TRY(attn_gguf_get_int(g, key, &L));
    if (L < 0 || L > 1 << 20)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s = %lld is out of range", name, key,
                         (long long)L);
    j->n_layer = (int)L;
    for (size_t i = 0; i < attn_gguf_tensor_count(g); i++) {
        const attn_gguf_tensor *t = attn_gguf_tensor_at(g, i);
        const void *d = attn_gguf_tensor_data(g, t);
        if (!d) return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: tensor data not mapped", name);
        ATTN_TRY(add_tensor(j, t->name, t->n_dims, t->ne, t->type, d, NULL));
    }
    return ATTN_STATUS_OK;
}

/* ---- from a Hugging Face directory: tensors ------------------------------------------------- */

/* convert_hf_to_gguf.py's LlamaModel.permute of rows (R, C) with n_head heads. */
static void permute_rows(const float *w, int64_t R, int64_t C, int n_head, float *out) {
    const int64_t per = R / n_head, half = per / 2;
    for (int h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int jj = 0; jj < 2; jj++)
                memcpy(out + (h * per + 2 * i + jj) * C, w + (h * per + jj * half + i) * C,
                       (size_t)C * sizeof(float));
}

/* Llama 3.1's rope scaling as convert_hf_to_gguf.py's rope_freqs factors (D/2). */
static void llama3_factors(const attn_gpt_config *c, float *out) {
    const int D = attn_gpt_head_dim(c);
    const attn_gpt_rope_scaling *r = &c->rope_scaling;
    const float old = (float)r->original_max_position_embeddings;
    const float low_wl = old / r->low_freq_factor, high_wl = old / r->high_freq_factor;
    for (int i = 0; i < D / 2; i++) {
        const float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)D);
        const float wl = (float)(2.0 * M_PI) / freq;
        if (wl < high_wl)
            out[i] = 1.0f;
        else if (wl > low_wl)
            out[i] = r->factor;
        else {
            const float sm = (old / wl - r->low_freq_factor) /
                             (r->high_freq_factor - r->low_freq_factor);
            out[i] = 1.0f / ((1.0f - sm) / r->factor + sm);
        }
    }
}

static attn_status hf_tensors(job *j, const attn_gpt_model *m) {
    const attn_gpt_config *c = &m->cfg;
    const bool llama_perm = c->arch == ATTN_GPT_ARCH_LLAMA || c->arch == ATTN_GPT_ARCH_MISTRAL;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *e = &m->tensors[i];
        char gname[160];
        bool conv1d;
        if (!gpt_gguf_tensor_name(e->name, gname, sizeof gname, &conv1d))
            return attn_fail(ATTN_STATUS_UNSUPPORTED, "quantize: no GGUF name for tensor '%s'",
                             e->name);
        const float *w = m->params + e->offset;
        const int64_t R = e->shape[0], C = e->ndim == 2 ? e->shape[1] : 1;
        int heads = 0;
        if (llama_perm && strstr(e->name, "self_attn.q_proj.")) heads = c->n_head;
        if (llama_perm && strstr(e->name, "self_attn.k_proj.")) heads = attn_gpt_kv_heads(c);
        if (conv1d) { /* (in, out) -> (out, in) */
            float *t = malloc((size_t)(R * C) * sizeof(float));
            ATTN_TRY(own(j, t));
            for (int64_t r = 0; r < R; r++)
                for (int64_t k = 0; k < C; k++) t[k * R + r] = w[r * C + k];
            const int64_t ne[2] = {R, C};
            ATTN_TRY(add_tensor(j, gname, 2, ne, ATTN_GGUF_DTYPE_F32, NULL, t));
            continue;
        }
        if (heads) {
            if (R % (2 * heads))
                return attn_fail(ATTN_STATUS_FORMAT,
                                 "quantize: %s has %lld rows, not a multiple of 2 x %d heads",
                                 e->name, (long long)R, heads);
            float *t = malloc((size_t)(R * C) * sizeof(float));
            ATTN_TRY(own(j, t));
            permute_rows(w, R, C, heads, t);
            w = t;
        }
        const int64_t ne[2] = {e->ndim == 2 ? C : R, R};
        ATTN_TRY(add_tensor(j, gname, e->ndim, ne, ATTN_GGUF_DTYPE_F32, NULL, w));
    }
    if (attn_gpt_is_llama(c) && c->rope_scaling.type == ATTN_GPT_ROPE_LLAMA3) {
        const int64_t half = attn_gpt_head_dim(c) / 2;
        float *f = malloc((size_t)half * sizeof(float));
        ATTN_TRY(own(j, f));
        llama3_factors(c, f);
        ATTN_TRY(add_tensor(j, "rope_freqs.weight", 1, &half, ATTN_GGUF_DTYPE_F32, NULL, f));
    }
    return ATTN_STATUS_OK;
}

/* ---- from a Hugging Face directory: hyperparameters ----------------------------------------- */

static const char *dir_basename(job *j, const char *dir) {
    char b[4096];
    snprintf(b, sizeof b, "%s", dir);
    size_t n = strlen(b);
    while (n > 1 && b[n - 1] == '/') b[--n] = '\0';
    const char *s = strrchr(b, '/');
    return own_str(j, s ? s + 1 : b);
}

static attn_status hf_params(job *j, const char *dir, const attn_gpt_config *c,
                             attn_gguf_ftype ft) {
    const char *arch = c->arch == ATTN_GPT_ARCH_GPT2    ? "gpt2"
                       : c->arch == ATTN_GPT_ARCH_QWEN2 ? "qwen2"
                       : c->arch == ATTN_GPT_ARCH_QWEN3 ? "qwen3"
                                                        : "llama";
    const char *k;
#define KEY(s) ((k = akey(j, arch, s)) ? k : "")
    ATTN_TRY(kv_set(j, attn_gguf_kv_str("general.architecture", arch)));
    ATTN_TRY(kv_set(j, attn_gguf_kv_str("general.type", "model")));
    const char *base = dir_basename(j, dir);
    if (!base) return oom();
    ATTN_TRY(kv_set(j, attn_gguf_kv_str("general.name", base)));
    ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("block_count"), (uint32_t)c->n_layer)));
    ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("context_length"), (uint32_t)c->n_positions)));
    ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("embedding_length"), (uint32_t)c->n_embd)));
    ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("feed_forward_length"),
                                        (uint32_t)attn_gpt_inner(c))));
    ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("attention.head_count"), (uint32_t)c->n_head)));
    if (c->arch == ATTN_GPT_ARCH_GPT2) {
        ATTN_TRY(kv_set(j, attn_gguf_kv_f32(KEY("attention.layer_norm_epsilon"),
                                            c->layer_norm_epsilon)));
    } else {
        ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("attention.head_count_kv"),
                                            (uint32_t)attn_gpt_kv_heads(c))));
        if (c->rope_scaling.type == ATTN_GPT_ROPE_LINEAR) {
            ATTN_TRY(kv_set(j, attn_gguf_kv_str(KEY("rope.scaling.type"), "linear")));
            ATTN_TRY(kv_set(j, attn_gguf_kv_f32(KEY("rope.scaling.factor"),
                                                c->rope_scaling.factor)));
        }
        ATTN_TRY(kv_set(j, attn_gguf_kv_f32(KEY("rope.freq_base"), c->rope_theta)));
        ATTN_TRY(kv_set(j, attn_gguf_kv_f32(KEY("attention.layer_norm_rms_epsilon"),
                                            c->layer_norm_epsilon)));
        /* only when config.json gives head_dim (convert_hf_to_gguf.py's rule) */
        char cpath[4200];
        snprintf(cpath, sizeof cpath, "%s/config.json", dir);
        json_t *root = NULL;
        ATTN_TRY(config_json_load(cpath, 0, &root));
        const bool has_hd = json_is_integer(json_object_get(root, "head_dim"));
        json_decref(root);
        if (has_hd && c->head_dim > 0) {
            ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("attention.key_length"),
                                                (uint32_t)c->head_dim)));
            ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("attention.value_length"),
                                                (uint32_t)c->head_dim)));
        }
    }
    ATTN_TRY(kv_set(j, attn_gguf_kv_u32("general.file_type", (uint32_t)ft)));
    if (c->arch == ATTN_GPT_ARCH_LLAMA || c->arch == ATTN_GPT_ARCH_MISTRAL) {
        ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("vocab_size"), (uint32_t)c->vocab_size)));
        ATTN_TRY(kv_set(j, attn_gguf_kv_u32(KEY("rope.dimension_count"),
                                            (uint32_t)attn_gpt_head_dim(c))));
    }
#undef KEY
    ATTN_TRY(kv_set(j, attn_gguf_kv_u32("general.quantization_version", 2)));
    return ATTN_STATUS_OK;
}

/* ---- from a Hugging Face directory: the tokenizer ------------------------------------------ */

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

static bool looks_special(const char *t) {
    const size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") ||
        !strcmp(t, "[@BOS@]"))
        return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    if (n >= 8 && !strncmp(t, "<\xef\xbd\x9c", 4) && !strcmp(t + n - 4, "\xef\xbd\x9c>"))
        return true;
    if (!strncmp(t, "<unused", 7) && t[n - 1] == '>') return true;
    return false;
}

/* The pre-tokenizer's name in llama.cpp, from tokenizer.json's structure. */
static const char *pre_name(const json_t *root) {
    const json_t *pt = json_object_get(root, "pre_tokenizer");
    const char *type = json_string_value(json_object_get(pt, "type"));
    if (!type) return NULL;
    if (!strcmp(type, "ByteLevel")) return "gpt-2";
    if (strcmp(type, "Sequence")) return NULL;
    const json_t *seq = json_object_get(pt, "pretokenizers");
    if (json_array_size(seq) != 2) return NULL;
    const char *t0 = json_string_value(json_object_get(json_array_get(seq, 0), "type"));
    const char *t1 = json_string_value(json_object_get(json_array_get(seq, 1), "type"));
    if (!t0 || !t1 || strcmp(t1, "ByteLevel")) return NULL;
    if (!strcmp(t0, "Digits")) return "smollm";
    if (strcmp(t0, "Split")) return NULL;
    const char *re = json_string_value(
        json_object_get(json_object_get(json_array_get(seq, 0), "pattern"), "Regex"));
    if (!re) return NULL;
    if (strstr(re, "\\p{N}{1,3}")) return "llama-bpe";
    if (strstr(re, "|\\p{N}|")) return "qwen2";
    return NULL;
}

/* tokenizer_config.json's entry for *_token: a string or {"content": ...} */
static const char *tc_token(const json_t *tc, const char *typ) {
    char k[32];
    snprintf(k, sizeof k, "%s_token", typ);
    const json_t *e = json_object_get(tc, k);
    if (json_is_string(e)) return json_string_value(e);
    if (json_is_object(e)) return json_string_value(json_object_get(e, "content"));
    return NULL;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        if (n + 1 >= cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
        }
        const size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (!r) break;
    }
    fclose(f);
    if (b) b[n] = '\0';
    return b;
}

#define N_SPECIAL 7
static const char *const SPECIAL[N_SPECIAL] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};

static attn_status hf_tokenizer(job *j, const char *dir, const attn_gpt_config *c) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (access(path, R_OK) != 0)
        return attn_fail(ATTN_STATUS_NOT_FOUND,
                         "%s: no tokenizer.json (a GGUF file carries its tokenizer; attn writes "
                         "byte-level BPE tokenizers from tokenizer.json)",
                         dir);
    json_t *root = NULL, *tc = NULL, *cfg = NULL;
    ATTN_TRY(config_json_load(path, 0, &root));
    attn_status s = ATTN_STATUS_OK;
    const json_t *model = json_object_get(root, "model");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    const json_t *vocab = json_object_get(model, "vocab");
    const char *pre = pre_name(root);
    if (!mtype || strcmp(mtype, "BPE") || json_is_true(json_object_get(model, "byte_fallback")) ||
        !json_is_object(vocab))
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: model type %s%s: attn writes byte-level BPE tokenizers only "
                      "(SentencePiece and WordPiece vocabularies are not supported yet)",
                      path, mtype ? mtype : "(none)",
                      json_is_true(json_object_get(model, "byte_fallback")) ? " with byte_fallback"
                                                                            : "");
    else if (!pre)
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: a pre-tokenizer llama.cpp has no name for that attn recognizes "
                      "(ByteLevel: gpt-2; Digits + ByteLevel: smollm; Split with Llama 3's or "
                      "Qwen2's regex + ByteLevel: llama-bpe, qwen2)",
                      path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!s && access(path, R_OK) == 0) s = config_json_load(path, JSON_DECODE_INT_AS_REAL, &tc);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!s) s = config_json_load(path, 0, &cfg);
    const int V = c->vocab_size;
    attn_gguf_str *toks = NULL;
    int32_t *types = NULL;
    if (!s) {
        toks = calloc((size_t)V, sizeof *toks);
        types = calloc((size_t)V, sizeof *types);
        if (own(j, toks) || own(j, types)) s = oom();
    }
    const json_t *added = json_object_get(root, "added_tokens");
    /* the vocabulary, then the added tokens over it */
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        if (s) break;
        const json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id >= V) {
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s/tokenizer.json: token '%.40s' has id %lld outside the model's "
                          "vocabulary of %d",
                          dir, key, (long long)id, V);
            break;
        }
        const char *t = own_str(j, key);
        if (!t) s = oom();
        toks[id].s = t, toks[id].len = strlen(key);
        types[id] = TT_NORMAL;
    }
    for (size_t i = 0; !s && i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const json_int_t id = json_integer_value(json_object_get(a, "id"));
        const char *content = json_string_value(json_object_get(a, "content"));
        if (!content || id < 0 || id >= V) {
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s/tokenizer.json: added_tokens[%zu] has no content or an id outside "
                          "the model's vocabulary of %d",
                          dir, i, V);
            break;
        }
        const bool special = json_is_true(json_object_get(a, "special"));
        char *t = own_str(j, content);
        if (!t) {
            s = oom();
            break;
        }
        if (special || looks_special(t)) {
            types[id] = TT_CONTROL;
        } else { /* "▁" -> " " (convert_hf_to_gguf.py's pre-normalization of user tokens) */
            char *w = t;
            for (const char *r = t; *r;) {
                if (!strncmp(r, "\xe2\x96\x81", 3)) *w++ = ' ', r += 3;
                else *w++ = *r++;
            }
            *w = '\0';
            types[id] = TT_USER;
        }
        toks[id].s = t, toks[id].len = strlen(t);
    }
    for (int i = 0; !s && i < V; i++)
        if (!toks[i].s) {
            char b[32];
            snprintf(b, sizeof b, "[PAD%d]", i);
            const char *t = own_str(j, b);
            if (!t) s = oom();
            toks[i].s = t, toks[i].len = strlen(b);
            types[i] = TT_UNUSED;
        }
    if (!s) s = kv_set(j, attn_gguf_kv_str("tokenizer.ggml.model", "gpt2"));
    if (!s) s = kv_set(j, attn_gguf_kv_str("tokenizer.ggml.pre", pre));
    if (!s) s = kv_set(j, attn_gguf_kv_arr("tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING,
                                           (uint64_t)V, toks));
    if (!s) s = kv_set(j, attn_gguf_kv_arr("tokenizer.ggml.token_type", ATTN_GGUF_TYPE_INT32,
                                           (uint64_t)V, types));
    /* merges */
    const json_t *merges = json_object_get(model, "merges");
    const size_t nm = json_array_size(merges);
    if (!s && nm) {
        attn_gguf_str *ms = calloc(nm, sizeof *ms);
        if (own(j, ms)) s = oom();
        for (size_t i = 0; !s && i < nm; i++) {
            const json_t *e = json_array_get(merges, i);
            char *m = NULL;
            if (json_is_string(e)) {
                m = own_str(j, json_string_value(e));
            } else if (json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                       json_is_string(json_array_get(e, 1))) {
                /* "a b", a space inside a part as U+0120 (gguf.SpecialVocab) */
                const char *p[2] = {json_string_value(json_array_get(e, 0)),
                                    json_string_value(json_array_get(e, 1))};
                m = malloc(2 * (strlen(p[0]) + strlen(p[1])) + 2);
                if (!own(j, m)) {
                    char *w = m;
                    for (int h = 0; h < 2; h++) {
                        if (h) *w++ = ' ';
                        for (const char *r = p[h]; *r; r++)
                            if (*r == ' ') *w++ = (char)0xc4, *w++ = (char)0xa0;
                            else *w++ = *r;
                    }
                    *w = '\0';
                } else {
                    m = NULL;
                }
            }
            if (!m) {
                s = attn_fail(ATTN_STATUS_FORMAT, "%s/tokenizer.json: merges[%zu] is malformed",
                              dir, i);
                break;
            }
            ms[i].s = m, ms[i].len = strlen(m);
        }
        if (!s) s = kv_set(j, attn_gguf_kv_arr("tokenizer.ggml.merges", ATTN_GGUF_TYPE_STRING,
                                               (uint64_t)nm, ms));
    }
    /* special tokens (gguf.SpecialVocab, the common cases) */
    int ids[N_SPECIAL];
    int add[N_SPECIAL]; /* -1 unset */
    for (int i = 0; i < N_SPECIAL; i++) ids[i] = -1, add[i] = -1;
    int order_ids[N_SPECIAL], n_ids = 0, order_add[N_SPECIAL], n_add = 0;
    const char *sbos = tc_token(tc, "bos"), *seos = tc_token(tc, "eos");
    if (!sbos) sbos = tc_token(tc, "cls");
    if (!seos) seos = tc_token(tc, "sep");
    const json_t *post = json_object_get(root, "post_processor");
    const json_t *procs = json_object_get(post, "processors");
    for (size_t pi = 0; !s && post && pi < (procs ? json_array_size(procs) : 1); pi++) {
        const json_t *pr = procs ? json_array_get(procs, pi) : post;
        const char *pt = json_string_value(json_object_get(pr, "type"));
        if (!pt) continue;
        if (!strcmp(pt, "ByteLevel")) {
            for (int k2 = 0; k2 < 2; k2++)
                if (add[k2] < 0) add[k2] = 0, order_add[n_add++] = k2;
        } else if (!strcmp(pt, "TemplateProcessing")) {
            const json_t *single = json_object_get(pr, "single");
            const size_t ns = json_array_size(single);
            if (ns > 1) {
                const char *first = json_string_value(json_object_get(
                    json_object_get(json_array_get(single, 0), "SpecialToken"), "id"));
                const char *last = json_string_value(json_object_get(
                    json_object_get(json_array_get(single, ns - 1), "SpecialToken"), "id"));
                if (first) {
                    if (!tc) sbos = first;
                    if (add[0] < 0) order_add[n_add++] = 0;
                    add[0] = sbos && !strcmp(first, sbos);
                }
                if (last) {
                    if (!tc) seos = last;
                    if (add[1] < 0) order_add[n_add++] = 1;
                    add[1] = seos && !strcmp(last, seos);
                }
                /* the pair template "A [sep] [eos] B" between the same first / last: add_sep */
                const json_t *pair = json_object_get(pr, "pair");
                size_t a0 = 0, a1 = json_array_size(pair);
#define SPID(k) json_string_value(json_object_get(json_object_get(json_array_get(pair, k), \
                                                                  "SpecialToken"), "id"))
#define SEQID(k) json_string_value(json_object_get(json_object_get(json_array_get(pair, k), \
                                                                   "Sequence"), "id"))
                if (a1 && first && SPID(0) && !strcmp(SPID(0), first)) a0 = 1;
                if (a1 > a0 && last && SPID(a1 - 1) && !strcmp(SPID(a1 - 1), last)) a1--;
                if (a1 > a0 + 2 && SEQID(a0) && !strcmp(SEQID(a0), "A") && SEQID(a1 - 1) &&
                    !strcmp(SEQID(a1 - 1), "B")) {
                    const char *ssep = tc_token(tc, "sep");
                    bool add_sep = false;
                    for (size_t k = a0 + 1; k < a1 - 1 && k < a0 + 3; k++) {
                        const char *e = SPID(k);
                        const bool is = e && ((ssep && !strcmp(e, ssep)) ||
                                              (seos && !strcmp(e, seos)));
                        if (is && (k == a0 + 2 || !last)) add_sep = true;
                    }
                    if (add[3] < 0) order_add[n_add++] = 3;
                    add[3] = add_sep;
                }
#undef SPID
#undef SEQID
            }
        }
    }
    for (int i = 0; !s && tc && i < N_SPECIAL; i++) {
        char k2[32];
        snprintf(k2, sizeof k2, "add_%s_token", SPECIAL[i]);
        const json_t *a = json_object_get(tc, k2);
        if (json_is_boolean(a) && add[i] < 0) add[i] = json_is_true(a), order_add[n_add++] = i;
        const char *content = i == 0 ? sbos : i == 1 ? seos : tc_token(tc, SPECIAL[i]);
        if (!content) continue;
        for (size_t t = 0; t < json_array_size(added); t++) {
            const json_t *at = json_array_get(added, t);
            const char *ct = json_string_value(json_object_get(at, "content"));
            if (ct && !strcmp(ct, content)) {
                const json_int_t id = json_integer_value(json_object_get(at, "id"));
                if (id >= 0 && ids[i] < 0) ids[i] = (int)id, order_ids[n_ids++] = i;
                break;
            }
        }
    }
    for (int i = 0; !s && i < N_SPECIAL; i++) { /* config.json's *_token_id */
        char k2[32];
        snprintf(k2, sizeof k2, "%s_token_id", SPECIAL[i]);
        const json_t *v = json_object_get(cfg, k2);
        if (json_is_integer(v) && json_integer_value(v) >= 0 && ids[i] < 0)
            ids[i] = (int)json_integer_value(v), order_ids[n_ids++] = i;
    }
    for (int k2 = 0; !s && k2 < n_ids; k2++) {
        const int i = order_ids[k2];
        char b[64];
        snprintf(b, sizeof b, "tokenizer.ggml.%s_token_id", SPECIAL[i]);
        const char *kk = own_str(j, b);
        s = kk ? kv_set(j, attn_gguf_kv_u32(kk, (uint32_t)ids[i])) : oom();
    }
    for (int k2 = 0; !s && k2 < n_add; k2++) {
        const int i = order_add[k2];
        char b[64];
        snprintf(b, sizeof b, "tokenizer.ggml.add_%s_token", SPECIAL[i]);
        const char *kk = own_str(j, b);
        s = kk ? kv_set(j, attn_gguf_kv_bool(kk, add[i] != 0)) : oom();
    }
    /* the chat template */
    if (!s && tc) {
        const char *tmpl = json_string_value(json_object_get(tc, "chat_template"));
        char *alt = NULL;
        if (!tmpl) {
            snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
            alt = read_text(path);
            if (alt && own(j, alt)) alt = NULL, s = oom();
            tmpl = alt;
        } else {
            tmpl = own_str(j, tmpl);
            if (!tmpl) s = oom();
        }
        if (!s && tmpl) s = kv_set(j, attn_gguf_kv_str("tokenizer.chat_template", tmpl));
    }
    (void)TT_UNKNOWN;
    json_decref(root);
    json_decref(tc);
    json_decref(cfg);
    return s;
}

/* ---- writing --------------------------------------------------------------------------------- */

static attn_status convert_one(const qt_tensor *t, float *f, void *out, const char *in) {
    const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    const float *src = t->f;
    if (!src) {
        if (t->cur == ATTN_GGUF_DTYPE_F32) {
            memcpy(f, t->bytes, (size_t)n * sizeof(float));
        } else if (attn_quant_type_known((uint32_t)t->cur)) {
            ATTN_TRY(attn_quant_dequantize((attn_qtype)t->cur, n, t->bytes, f));
        } else {
            const char *tn = attn_gguf_dtype_name(t->cur);
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: tensor '%s' has type %s, which attn cannot convert (F32, F16, "
                             "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
                             in, t->name, tn ? tn : "?");
        }
        src = f;
    }
    if (t->dst == ATTN_GGUF_DTYPE_F32) {
        memcpy(out, src, (size_t)n * sizeof(float));
        return ATTN_STATUS_OK;
    }
    return attn_quant_quantize((attn_qtype)t->dst, n, src, out);
}

static attn_status write_job(job *j, const char *in, const char *out,
                             const attn_gguf_quantize_params *p) {
    qsort(j->t, j->n_t, sizeof *j->t, cmp_tensor);
    int n_attn_v = 0, i_attn_v = 0, i_ffn_down = 0;
    bool tied = true;
    for (size_t i = 0; i < j->n_t; i++) {
        if (strstr(j->t[i].name, "attn_v.weight") || strstr(j->t[i].name, "attn_qkv.weight"))
            n_attn_v++;
        if (!strcmp(j->t[i].name, "output.weight")) tied = false;
    }
    attn_gguf_tensor_desc *d = calloc(j->n_t ? j->n_t : 1, sizeof *d);
    if (!d) return oom();
    size_t max_out = 0, max_f = 0;
    for (size_t i = 0; i < j->n_t; i++) {
        qt_tensor *t = &j->t[i];
        t->dst = attn_gguf_quantize_pick(p, t->name, t->n_dims, t->ne, t->cur, j->n_layer,
                                         n_attn_v, tied, &i_attn_v, &i_ffn_down);
        if (t->dst != t->cur && !t->f && t->cur != ATTN_GGUF_DTYPE_F32 &&
            !attn_quant_type_known((uint32_t)t->cur)) {
            const char *tn = attn_gguf_dtype_name(t->cur);
            free(d);
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: tensor '%s' has type %s, which attn cannot convert to %s", in,
                             t->name, tn ? tn : "?", attn_gguf_dtype_name(t->dst));
        }
        uint64_t nb;
        if (!attn_gguf_nbytes(t->dst, t->n_dims, t->ne, &nb)) {
            free(d);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "%s: tensor '%s': a row of %lld elements does not fit type %s", in,
                             t->name, (long long)t->ne[0], attn_gguf_dtype_name(t->dst));
        }
        if (nb > max_out) max_out = (size_t)nb;
        const uint64_t nel = (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (!t->f && t->dst != t->cur && nel > max_f) max_f = (size_t)nel;
        d[i].name = t->name, d[i].type = t->dst, d[i].n_dims = t->n_dims;
        memcpy(d[i].ne, t->ne, sizeof d[i].ne);
    }
    attn_gguf_writer *w = NULL;
    attn_status s = attn_gguf_writer_open(out, j->kv, j->n_kv, d, j->n_t, &w);
    free(d);
    if (s) return s;
    void *buf = malloc(max_out ? max_out : 1);
    float *fb = malloc((max_f ? max_f : 1) * sizeof(float));
    if (!buf || !fb) s = oom();
    for (size_t i = 0; i < j->n_t && !s; i++) {
        const qt_tensor *t = &j->t[i];
        uint64_t nb;
        attn_gguf_nbytes(t->dst, t->n_dims, t->ne, &nb);
        if (p->progress)
            p->progress(p->user, (int)i, (int)j->n_t, t->name, t->cur, t->dst, t->n_dims, t->ne);
        const void *data = t->bytes;
        if (t->dst != t->cur || !t->bytes) {
            s = convert_one(t, fb, buf, in);
            data = buf;
        }
        if (!s) {
            s = attn_gguf_writer_write(w, data, (size_t)nb);
            if (s) w = NULL; /* a failed write freed it */
        }
    }
    free(buf);
    free(fb);
    if (s) {
        if (w) attn_gguf_writer_abort(w);
        return s;
    }
    return attn_gguf_writer_finish(w);
}

attn_status attn_gguf_quantize(const char *in, const char *out,
                               const attn_gguf_quantize_params *params) {
    if (!in || !out || !params)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "quantize: NULL argument");
    if (!attn_gguf_ftype_name(params->ftype))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "quantize: unknown file type %d",
                         (int)params->ftype);
    job j;
    memset(&j, 0, sizeof j);
    attn_status s;
    if (attn_gpt_is_gguf_path(in)) {
        attn_gguf *g = NULL;
        s = attn_gguf_open(in, &g);
        if (!s) s = from_gguf(&j, g);
        if (!s) s = kv_set(&j, attn_gguf_kv_u32("general.quantization_version", 2));
        if (!s) s = kv_set(&j, attn_gguf_kv_u32("general.file_type", (uint32_t)params->ftype));
        if (!s) s = write_job(&j, in, out, params);
        attn_gguf_close(g);
    } else {
        attn_gpt_model *m = NULL;
        s = attn_gpt_load_dir(in, &m);
        if (!s) {
            j.n_layer = m->cfg.n_layer;
            s = hf_params(&j, in, &m->cfg, params->ftype);
        }
        if (!s) s = hf_tokenizer(&j, in, &m->cfg);
        if (!s) s = hf_tensors(&j, m);
        if (!s) s = write_job(&j, in, out, params);
        attn_gpt_model_free(m);
    }
    job_free(&j);
    return s;
}

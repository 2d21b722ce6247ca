/* gpt_io.c — GPT-2 model directories in Hugging Face's format (attn_gpt.h): config.json plus
 * model.safetensors (or a sharded model.safetensors.index.json), loaded strictly by name and
 * shape, and written so that transformers' from_pretrained loads them. */
#include "attn_gpt.h"

#include "../core/core-impl.h"
#include "attn_io.h"
#include "gpt-impl.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* DIR/name into buf; false (with an error recorded) when it does not fit. */
static bool dir_path(char *buf, size_t n, const char *dir, const char *name) {
    int k = snprintf(buf, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n) {
        attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: directory path too long: %s", dir);
        return false;
    }
    return true;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* ---- the set of weight files ------------------------------------------------------------- */

#define MAX_SHARDS 256

typedef struct {
    int n;
    attn_st_file *f[MAX_SHARDS];
    char *path[MAX_SHARDS];
} shard_set;

static void shards_close(shard_set *s) {
    for (int i = 0; i < s->n; i++) {
        attn_st_close(s->f[i]);
        attn_free(s->path[i]);
    }
    s->n = 0;
}

static attn_status shards_add(shard_set *s, const char *path) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->path[i], path) == 0) return ATTN_STATUS_OK;
    if (s->n == MAX_SHARDS)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: more than %d safetensors shards", path,
                         MAX_SHARDS);
    size_t len = strlen(path) + 1;
    char *p = attn_alloc(len);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt load: out of memory");
    memcpy(p, path, len);
    attn_st_file *f;
    attn_status st = attn_st_open(path, &f);
    if (st) {
        attn_free(p);
        return st;
    }
    s->f[s->n] = f;
    s->path[s->n] = p;
    s->n++;
    return ATTN_STATUS_OK;
}

/* Open the shards listed by DIR/model.safetensors.index.json ({"weight_map": {name: file}}). */
static attn_status open_index(const char *dir, const char *index, shard_set *s) {
    json_error_t err;
    json_t *root = json_load_file(index, 0, &err);
    if (!root)
        return attn_fail(ATTN_STATUS_FORMAT, "%s:%d: invalid JSON: %s", index, err.line, err.text);
    attn_status st = ATTN_STATUS_OK;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        st = attn_fail(ATTN_STATUS_FORMAT, "%s: \"weight_map\" must be an object", index);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        const char *file = json_string_value(v);
        if (!file || !*file || strchr(file, '/') || strcmp(file, "..") == 0) {
            st = attn_fail(ATTN_STATUS_FORMAT,
                           "%s: weight_map[\"%s\"] must be a file name in the same directory",
                           index, key);
            goto done;
        }
        char path[4096];
        if (!dir_path(path, sizeof path, dir, file)) {
            st = ATTN_STATUS_INVALID_ARGUMENT;
            goto done;
        }
        st = shards_add(s, path);
        if (st) goto done;
    }
    if (s->n == 0) st = attn_fail(ATTN_STATUS_FORMAT, "%s: empty weight_map", index);
done:
    json_decref(root);
    return st;
}

static const attn_st_tensor *find_any(const shard_set *s, const char *name, int *which) {
    for (int i = 0; i < s->n; i++) {
        const attn_st_tensor *t = attn_st_find(s->f[i], name);
        if (t) {
            *which = i;
            return t;
        }
    }
    return NULL;
}

/* Non-parameter buffers of older GPT-2 checkpoints: [transformer.]h.N.attn.bias and
 * h.N.attn.masked_bias (the causal mask and its fill value). */
static bool ignorable_buffer(const char *name) {
    const char *p = name;
    if (strncmp(p, "transformer.", 12) == 0) p += 12;
    if (strncmp(p, "h.", 2) != 0) return false;
    p += 2;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, ".attn.bias") == 0 || strcmp(p, ".attn.masked_bias") == 0;
}

static void shape_str(const attn_gpt_tensor *t, char *buf, size_t n) {
    if (t->ndim == 1)
        snprintf(buf, n, "(%lld)", (long long)t->shape[0]);
    else
        snprintf(buf, n, "(%lld, %lld)", (long long)t->shape[0], (long long)t->shape[1]);
}

static attn_status load_weights(attn_gpt_model *m, shard_set *s, const char *what) {
    /* Files written by GPT2LMHeadModel prefix the trunk's tensors with "transformer."; files
     * written by GPT2Model do not. */
    int w;
    const char *prefix;
    if (find_any(s, "transformer.wte.weight", &w))
        prefix = "transformer.";
    else if (find_any(s, "wte.weight", &w))
        prefix = "";
    else
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor 'transformer.wte.weight' (or 'wte.weight') is missing "
                         "(expected shape (%d, %d))",
                         what, m->cfg.vocab_size, m->cfg.n_embd);
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        char name[96];
        if (strncmp(t->name, "transformer.", 12) == 0)
            snprintf(name, sizeof name, "%s%s", prefix, t->name + 12);
        else
            snprintf(name, sizeof name, "%s", t->name);
        char shp[64];
        shape_str(t, shp, sizeof shp);
        if (!find_any(s, name, &w))
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tensor '%s' is missing (expected shape %s for the model in "
                             "config.json)",
                             s->n == 1 ? s->path[0] : what, name, shp);
        attn_status st = attn_st_read_f32(s->f[w], name, t->ndim, t->shape, m->params + t->offset);
        if (st == ATTN_STATUS_FORMAT) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            return attn_fail(st, "%s (expected %s for config.json)", msg, shp);
        }
        ATTN_TRY(st);
    }
    /* Nothing else may be there: a stray tensor means the file belongs to another configuration
     * (more layers, an untied head loaded as tied, ...), which must not pass silently. */
    char extra[512] = "";
    size_t used = 0;
    int n_extra = 0;
    const char *first_file = NULL;
    for (int f = 0; f < s->n; f++)
        for (int i = 0; i < attn_st_count(s->f[f]); i++) {
            const char *name = attn_st_tensor_at(s->f[f], i)->name;
            if (ignorable_buffer(name)) continue;
            if (strcmp(name, "lm_head.weight") == 0 && m->cfg.tie_word_embeddings) continue;
            /* lm_head.weight: loaded when untied, ignored when tied. */
            if (strcmp(name, "lm_head.weight") == 0) continue;
            size_t plen = strlen(prefix);
            if (strncmp(name, prefix, plen) == 0) {
                char full[128];
                snprintf(full, sizeof full, "transformer.%s", name + plen);
                if (attn_gpt_find_tensor(m, full)) continue;
            }
            if (!first_file) first_file = s->path[f];
            if (n_extra++ < 8 && used < sizeof extra - 1) {
                int k =
                    snprintf(extra + used, sizeof extra - used, "%s'%s'", used ? ", " : "", name);
                if (k > 0) used = ATTN_MIN(sizeof extra - 1, used + (size_t)k);
            }
        }
    if (n_extra)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: %d tensor(s) not in the model of config.json: %s%s", first_file,
                         n_extra, extra, n_extra > 8 ? ", ..." : "");
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_load_dir(const char *dir, attn_gpt_model **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt load: NULL argument");
    *out = NULL;
    char path[4096], index[4096];
    if (!dir_path(path, sizeof path, dir, "config.json")) return ATTN_STATUS_INVALID_ARGUMENT;
    attn_gpt_config cfg;
    ATTN_TRY(attn_gpt_config_load(path, &cfg)); /* names the file and the field */
    if (!dir_path(path, sizeof path, dir, "model.safetensors") ||
        !dir_path(index, sizeof index, dir, "model.safetensors.index.json"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    bool single = file_exists(path), sharded = !single && file_exists(index);
    if (!single && !sharded) {
        char bin[4096];
        if (dir_path(bin, sizeof bin, dir, "pytorch_model.bin") &&
            (file_exists(bin) ||
             (dir_path(bin, sizeof bin, dir, "pytorch_model.bin.index.json") && file_exists(bin))))
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: only PyTorch pickle weights (%s); attn reads safetensors — "
                             "re-save with model.save_pretrained(DIR, safe_serialization=True)",
                             dir, bin);
        return attn_fail(ATTN_STATUS_IO,
                         "%s: no model.safetensors (or "
                         "model.safetensors.index.json) in the model directory",
                         path);
    }
    attn_gpt_model *m;
    ATTN_TRY(gpt_model_alloc(&cfg, false, &m));
    shard_set s;
    memset(&s, 0, sizeof s);
    attn_status st = single ? shards_add(&s, path) : open_index(dir, index, &s);
    if (!st) st = load_weights(m, &s, single ? path : index);
    shards_close(&s);
    if (st) {
        attn_gpt_model_free(m);
        return st;
    }
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_save_dir(const attn_gpt_model *m, const char *dir) {
    if (!m || !dir || !*dir)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt save: NULL argument");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return attn_fail(ATTN_STATUS_IO, "gpt save: cannot create directory %s: %s", dir,
                         strerror(errno));
    char path[4096];
    /* Weights first, then the config: a reader that finds a config beside an old weight file
     * fails its shape checks loudly rather than loading half-updated weights silently. */
    if (!dir_path(path, sizeof path, dir, "model.safetensors")) return ATTN_STATUS_INVALID_ARGUMENT;
    attn_st_entry *e = attn_calloc((size_t)m->n_tensors * sizeof *e);
    if (!e) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt save: out of memory");
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        e[i].name = t->name;
        e[i].dtype = ATTN_DTYPE_F32;
        e[i].ndim = t->ndim;
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
        e[i].data = m->params + t->offset;
    }
    /* transformers refuses a safetensors file whose metadata lacks format "pt". */
    static const char *const meta[] = {"format", "pt", NULL};
    attn_status s = attn_st_save(path, e, m->n_tensors, meta);
    attn_free(e);
    ATTN_TRY(s);
    if (!dir_path(path, sizeof path, dir, "config.json")) return ATTN_STATUS_INVALID_ARGUMENT;
    return attn_gpt_config_save(path, &m->cfg);
}

/* weights.c — a model directory's weights for every family (models-impl.h): DIR/model.safetensors
 * or a sharded DIR/model.safetensors.index.json, loaded strictly into a parameter table through
 * the family's name map, and written as transformers' save_pretrained writes them. */
#include "models-impl.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

bool mdl_dir_path(char *buf, size_t n, const char *dir, const char *name, const char *what) {
    int k = snprintf(buf, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n) {
        attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: directory path too long: %s", what, dir);
        return false;
    }
    return true;
}

bool mdl_file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

attn_status mdl_make_dir(const char *dir, const char *what) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return attn_fail(ATTN_STATUS_IO, "%s: cannot create directory %s: %s", what, dir,
                         strerror(errno));
    return ATTN_STATUS_OK;
}

/* ---- the set of weight files ------------------------------------------------------------- */

#define MAX_SHARDS 256

struct mdl_weights {
    int n;
    attn_st_file *f[MAX_SHARDS];
    char *path[MAX_SHARDS];
    char where[4096]; /* the file, or the index, for messages */
};

void mdl_weights_close(mdl_weights *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        attn_st_close(s->f[i]);
        attn_free(s->path[i]);
    }
    attn_free(s);
}

static attn_status shards_add(mdl_weights *s, const char *path) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->path[i], path) == 0) return ATTN_STATUS_OK;
    if (s->n == MAX_SHARDS)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: more than %d safetensors shards", path,
                         MAX_SHARDS);
    size_t len = strlen(path) + 1;
    char *p = attn_alloc(len);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "weights: out of memory");
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

/* The shards listed by DIR/model.safetensors.index.json ({"weight_map": {name: file}}). */
static attn_status open_index(const char *dir, const char *index, const char *what,
                              mdl_weights *s) {
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
        if (!mdl_dir_path(path, sizeof path, dir, file, what)) {
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

attn_status mdl_weights_open(const char *dir, const char *what, mdl_weights **out) {
    *out = NULL;
    char path[4096], index[4096];
    if (!mdl_dir_path(path, sizeof path, dir, "model.safetensors", what) ||
        !mdl_dir_path(index, sizeof index, dir, "model.safetensors.index.json", what))
        return ATTN_STATUS_INVALID_ARGUMENT;
    const bool sharded = !mdl_file_exists(path) && mdl_file_exists(index), single = !sharded;
    if (!mdl_file_exists(path) && !sharded) {
        char bin[4096];
        if (mdl_dir_path(bin, sizeof bin, dir, "pytorch_model.bin", what) &&
            (mdl_file_exists(bin) ||
             (mdl_dir_path(bin, sizeof bin, dir, "pytorch_model.bin.index.json", what) &&
              mdl_file_exists(bin))))
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: only PyTorch pickle weights (%s); attn reads safetensors — "
                             "re-save with model.save_pretrained(DIR, safe_serialization=True)",
                             dir, bin);
        /* Otherwise the safetensors reader says what is wrong with the path (absent, not a
         * regular file, unreadable). */
    }
    mdl_weights *s = attn_calloc(sizeof *s);
    if (!s) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
    snprintf(s->where, sizeof s->where, "%s", single ? path : index);
    attn_status st = single ? shards_add(s, path) : open_index(dir, index, what, s);
    if (st) {
        mdl_weights_close(s);
        return st;
    }
    *out = s;
    return ATTN_STATUS_OK;
}

const attn_st_tensor *mdl_weights_find(const mdl_weights *s, const char *name, attn_st_file **f) {
    for (int i = 0; i < s->n; i++) {
        const attn_st_tensor *t = attn_st_find(s->f[i], name);
        if (t) {
            if (f) *f = s->f[i];
            return t;
        }
    }
    return NULL;
}

bool mdl_weights_has_prefix(const mdl_weights *s, const char *prefix) {
    const size_t n = strlen(prefix);
    for (int f = 0; f < s->n; f++)
        for (int i = 0; i < attn_st_count(s->f[f]); i++)
            if (strncmp(attn_st_tensor_at(s->f[f], i)->name, prefix, n) == 0) return true;
    return false;
}

int mdl_weights_count(const mdl_weights *s) {
    int n = 0;
    for (int f = 0; f < s->n; f++) n += attn_st_count(s->f[f]);
    return n;
}

const char *mdl_weights_name(const mdl_weights *s, int i) {
    for (int f = 0; f < s->n; f++) {
        const int c = attn_st_count(s->f[f]);
        if (i < c) return attn_st_tensor_at(s->f[f], i)->name;
        i -= c;
    }
    return NULL;
}

const char *mdl_weights_path(const mdl_weights *s) { return s->where; }

/* ---- loading and saving a table ------------------------------------------------------------ */

static void shape_str(const attn_param_info *t, char *buf, size_t n) {
    if (t->ndim == 1)
        snprintf(buf, n, "(%lld)", (long long)t->shape[0]);
    else
        snprintf(buf, n, "(%lld, %lld)", (long long)t->shape[0], (long long)t->shape[1]);
}

attn_status mdl_load_params(const mdl_weights *w, const attn_param_info *t, int n, float *params,
                            const mdl_name_map *map) {
    /* The file name each entry was read from: for the stray-tensor check below. */
    char(*used)[128] = attn_calloc((size_t)(n > 0 ? n : 1) * sizeof *used);
    if (!used) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->where);
    attn_status st = ATTN_STATUS_OK;
    for (int i = 0; i < n && !st; i++) {
        char name[128], first[128] = "";
        attn_st_file *f = NULL;
        bool found = false;
        for (int k = 0; !found && map->file_name(map->ctx, &t[i], k, name, sizeof name); k++) {
            if (k == 0) snprintf(first, sizeof first, "%s", name);
            found = mdl_weights_find(w, name, &f) != NULL;
        }
        char shp[64];
        shape_str(&t[i], shp, sizeof shp);
        if (!found) {
            st = attn_fail(ATTN_STATUS_FORMAT,
                           "%s: tensor '%s' is missing (expected shape %s for the model of "
                           "config.json)",
                           w->where, first, shp);
            break;
        }
        snprintf(used[i], sizeof used[i], "%s", name);
        st = attn_st_read_f32(f, name, t[i].ndim, t[i].shape, params + t[i].offset);
        if (st == ATTN_STATUS_FORMAT) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            st = attn_fail(st, "%s (expected %s for config.json)", msg, shp);
        }
    }
    /* Nothing else may be there: a stray tensor means the file belongs to another configuration
     * (more layers, an untied head loaded as tied, ...), which must not pass silently. */
    char extra[512] = "";
    size_t len = 0;
    int n_extra = 0;
    const int count = mdl_weights_count(w);
    for (int j = 0; j < count && !st; j++) {
        const char *name = mdl_weights_name(w, j);
        bool taken = false;
        for (int i = 0; i < n && !taken; i++) taken = strcmp(used[i], name) == 0;
        if (taken || (map->ignorable && map->ignorable(map->ctx, name))) continue;
        if (n_extra++ < 8 && len < sizeof extra - 1) {
            int k = snprintf(extra + len, sizeof extra - len, "%s'%s'", len ? ", " : "", name);
            if (k > 0) len = ATTN_MIN(sizeof extra - 1, len + (size_t)k);
        }
    }
    if (!st && n_extra)
        st = attn_fail(ATTN_STATUS_FORMAT, "%s: %d tensor(s) not in the model of config.json: %s%s",
                       w->where, n_extra, extra, n_extra > 8 ? ", ..." : "");
    attn_free(used);
    return st;
}

attn_status mdl_save_params(const char *path, const attn_param_info *t, int n,
                            const float *params, const mdl_name_map *map,
                            const char *const *meta) {
    attn_st_entry *e = attn_calloc((size_t)(n > 0 ? n : 1) * sizeof *e);
    char(*names)[128] = attn_calloc((size_t)(n > 0 ? n : 1) * sizeof *names);
    if (!e || !names) {
        attn_free(e);
        attn_free(names);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!map->file_name(map->ctx, &t[i], 0, names[k], sizeof names[k])) continue;
        e[k].name = names[k];
        e[k].dtype = ATTN_DTYPE_F32;
        e[k].ndim = t[i].ndim;
        e[k].shape[0] = t[i].shape[0];
        e[k].shape[1] = t[i].shape[1];
        e[k].data = params + t[i].offset;
        k++;
    }
    attn_status s = attn_st_save(path, e, k, meta);
    attn_free(e);
    attn_free(names);
    return s;
}

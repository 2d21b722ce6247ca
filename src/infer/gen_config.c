/* gen_config.c — a model directory's generation_config.json (attn_gen.h: attn_gen_config_load):
 * transformers' GenerationConfig sampling defaults and end-of-text ids, read with jansson; every
 * failure names the file and the field. */
#include "attn_gen.h"

#include "../core/core-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void defaults(attn_gen_config *c) {
    memset(c, 0, sizeof *c);
    c->params = attn_gen_default_params();
    c->params.greedy = true; /* GenerationConfig: do_sample = False */
    c->bos_token_id = -1;
}

static attn_status bad(const char *name, const char *key, const char *want) {
    return attn_fail(ATTN_STATUS_FORMAT, "%s: \"%s\" must be %s", name, key, want);
}

static attn_status get_num(json_t *root, const char *name, const char *key, double lo, double hi,
                           bool null_ok, float *out) {
    json_t *v = json_object_get(root, key);
    if (!v || (null_ok && json_is_null(v))) return ATTN_STATUS_OK;
    if (!json_is_number(v)) return bad(name, key, "a number");
    const double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        char want[96];
        snprintf(want, sizeof want, "a number in [%g, %g] (got %g)", lo, hi, d);
        return bad(name, key, want);
    }
    *out = (float)d;
    return ATTN_STATUS_OK;
}

static attn_status get_int(json_t *v, const char *name, const char *key, int lo, int hi, int *out) {
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char want[96];
        snprintf(want, sizeof want, "an integer in [%d, %d]", lo, hi);
        return bad(name, key, want);
    }
    *out = (int)json_integer_value(v);
    return ATTN_STATUS_OK;
}

static attn_status parse(json_t *root, const char *name, attn_gen_config *c) {
    if (!json_is_object(root))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: generation config must be a JSON object", name);
    defaults(c);
    c->found = true;
    attn_gen_params *p = &c->params;
    json_t *v;
    if ((v = json_object_get(root, "do_sample")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) return bad(name, "do_sample", "true or false");
        p->greedy = !json_is_true(v);
    }
    ATTN_TRY(get_num(root, name, "temperature", 0, 1e6, true, &p->temperature));
    ATTN_TRY(get_num(root, name, "top_p", 0, 1, true, &p->top_p));
    ATTN_TRY(get_num(root, name, "min_p", 0, 1, true, &p->min_p));
    ATTN_TRY(get_num(root, name, "repetition_penalty", 1e-6, 1e6, true, &p->repetition_penalty));
    if ((v = json_object_get(root, "top_k")) && !json_is_null(v))
        ATTN_TRY(get_int(v, name, "top_k", 0, 1 << 24, &p->top_k));
    if ((v = json_object_get(root, "max_new_tokens")) && !json_is_null(v))
        ATTN_TRY(get_int(v, name, "max_new_tokens", 1, 1 << 24, &c->max_new_tokens));
    if ((v = json_object_get(root, "bos_token_id")) && !json_is_null(v))
        ATTN_TRY(get_int(v, name, "bos_token_id", 0, 1 << 24, &c->bos_token_id));
    if ((v = json_object_get(root, "eos_token_id")) && !json_is_null(v)) {
        if (json_is_array(v)) {
            if (json_array_size(v) > ATTN_GEN_MAX_STOP_IDS)
                return attn_fail(ATTN_STATUS_UNSUPPORTED,
                                 "%s: \"eos_token_id\" lists %zu ids (attn keeps at most %d)", name,
                                 json_array_size(v), ATTN_GEN_MAX_STOP_IDS);
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) {
                int id = 0;
                ATTN_TRY(get_int(e, name, "eos_token_id", 0, 1 << 24, &id));
                c->eos_token_ids[c->n_eos++] = id;
            }
        } else {
            int id = 0;
            ATTN_TRY(get_int(v, name, "eos_token_id", 0, 1 << 24, &id));
            c->eos_token_ids[c->n_eos++] = id;
        }
    }
    return ATTN_STATUS_OK;
}

attn_status attn_gen_config_parse(const char *text, const char *name, attn_gen_config *out) {
    if (!text || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_config: NULL argument");
    if (!name) name = "<generation_config>";
    json_error_t err;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return attn_fail(ATTN_STATUS_FORMAT, "%s:%d:%d: invalid JSON: %s", name, err.line,
                         err.column, err.text);
    attn_status s = parse(root, name, out);
    json_decref(root);
    return s;
}

attn_status attn_gen_config_load(const char *dir, attn_gen_config *out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_config: NULL argument");
    defaults(out);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/generation_config.json", dir) >= (int)sizeof path)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_config: directory name too long");
    struct stat st;
    if (stat(path, &st) != 0) return ATTN_STATUS_OK; /* no file: the defaults */
    if (!S_ISREG(st.st_mode))
        return attn_fail(ATTN_STATUS_IO, "%s: not a regular file", path);
    if (st.st_size > (1 << 20))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: %lld bytes is too large for a generation config",
                         path, (long long)st.st_size);
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return attn_fail(ATTN_STATUS_FORMAT, "%s:%d:%d: invalid JSON: %s", path, err.line,
                         err.column, err.text);
    attn_status s = parse(root, path, out);
    json_decref(root);
    return s;
}

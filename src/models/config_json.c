/* config_json.c — the model configurations' shared JSON readers and writers (config-impl.h). */
#include "config-impl.h"

#include "../core/core-impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static attn_status bad_json(const char *name, const json_error_t *err) {
    return attn_fail(ATTN_STATUS_FORMAT, "%s:%d:%d: invalid JSON: %s", name, err->line,
                     err->column, err->text);
}

attn_status config_json_need_object(const json_t *root, const char *name) {
    if (!json_is_object(root))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: model config must be a JSON object", name);
    return ATTN_STATUS_OK;
}

attn_status config_json_load(const char *path, size_t flags, json_t **root) {
    json_error_t err;
    *root = json_load_file(path, flags, &err);
    if (!*root) {
        /* jansson reports a missing file as a parse error at line -1. */
        if (err.line < 0)
            return attn_fail(ATTN_STATUS_IO, "%s: cannot read model config: %s", path, err.text);
        return bad_json(path, &err);
    }
    attn_status s = config_json_need_object(*root, path);
    if (s) {
        json_decref(*root);
        *root = NULL;
    }
    return s;
}

attn_status config_json_loads(const char *text, const char *name, json_t **root) {
    json_error_t err;
    *root = json_loads(text, 0, &err);
    if (!*root) return bad_json(name, &err);
    attn_status s = config_json_need_object(*root, name);
    if (s) {
        json_decref(*root);
        *root = NULL;
    }
    return s;
}

/* A JSON integer (or, when integral_ok, a real with an integral value) within int32. */
static bool json_int32(const json_t *v, bool integral_ok, int *out) {
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (integral_ok && json_is_real(v))
        d = json_real_value(v);
    else
        return false;
    if (!(d >= INT32_MIN && d <= INT32_MAX) || d != floor(d)) return false;
    *out = (int)d;
    return true;
}

attn_status config_read_int(const char *name, const char *key, const json_t *v,
                            config_int_kind kind, int *out) {
    if (kind == CONFIG_INT_SIZE) {
        if (!json_is_integer(v))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: field \"%s\" must be an integer", name, key);
        json_int_t x = json_integer_value(v);
        if (x > INT32_MAX)
            return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: field \"%s\" = %lld is absurdly large",
                             name, key, (long long)x);
        if (x < INT32_MIN)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: field \"%s\" = %lld is out of range", name,
                             key, (long long)x);
        *out = (int)x;
        return ATTN_STATUS_OK;
    }
    if (!json_int32(v, kind != CONFIG_INT_STRICT, out))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: field \"%s\" must be a 32-bit integer%s", name,
                         key, kind == CONFIG_INT_INTEGRAL_OR_NULL ? " or null" : "");
    return ATTN_STATUS_OK;
}

attn_status config_read_float(const char *name, const char *key, const json_t *v,
                              bool float_range, float *out) {
    if (!json_is_number(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: field \"%s\" must be a number", name, key);
    double x = json_number_value(v);
    if (float_range && !(fabs(x) <= FLT_MAX))
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: field \"%s\" must be a number within float range, got %g", name, key,
                         x);
    *out = (float)x;
    return ATTN_STATUS_OK;
}

attn_status config_read_bool(const char *name, const char *key, const json_t *v, bool *out) {
    if (!json_is_boolean(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: field \"%s\" must be true or false", name, key);
    *out = json_is_true(v);
    return ATTN_STATUS_OK;
}

attn_status config_read_string(const char *name, const char *key, const json_t *v,
                               const char **out) {
    *out = json_string_value(v);
    if (!*out) return attn_fail(ATTN_STATUS_FORMAT, "%s: field \"%s\" must be a string", name, key);
    return ATTN_STATUS_OK;
}

attn_status config_check_sizes(const char *what, const config_size *sz, size_t n,
                               const char *too_large) {
    for (size_t i = 0; i < n; i++) {
        if (sz[i].v <= 0)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s config: %s must be > 0 (got %d)",
                             what, sz[i].name, sz[i].v);
        if (sz[i].max > 0 && sz[i].v > sz[i].max)
            return attn_fail(ATTN_STATUS_TOO_LARGE, "%s config: %s = %d is %s (limit %d)", what,
                             sz[i].name, sz[i].v, too_large, sz[i].max);
    }
    return ATTN_STATUS_OK;
}

attn_status config_check_prob(const char *what, const char *name, float v) {
    if (!(v >= 0.0f && v < 1.0f))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s config: %s must be in [0, 1) (got %g)",
                         what, name, (double)v);
    return ATTN_STATUS_OK;
}

attn_status config_check_positive(const char *what, const char *name, float v, bool nonneg) {
    if (!(nonneg ? v >= 0.0f : v > 0.0f) || !isfinite(v))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s config: %s must be %s 0 (got %g)", what,
                         name, nonneg ? ">=" : ">", (double)v);
    return ATTN_STATUS_OK;
}

attn_status config_prefix_error(attn_status s, const char *name) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", attn_last_error());
    return attn_fail(s, "%s: %s", name, msg);
}

json_t *config_json_float(float x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", (double)x);
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)x);
        if ((float)strtod(buf, NULL) == x) break;
    }
    return json_real(strtod(buf, NULL));
}

attn_status config_json_save(json_t *o, const char *path) {
    char tmp[4096];
    int k = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (k < 0 || (size_t)k >= sizeof tmp) {
        json_decref(o);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: path too long", path);
    }
    int rc = json_dump_file(o, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (rc != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return attn_fail(ATTN_STATUS_IO, "%s: cannot write model config", path);
    }
    return ATTN_STATUS_OK;
}

attn_status config_read_typed(const char *name, const char *key, const json_t *v, int type,
                              void *dst, int null_value) {
    switch (type) {
    case CONFIG_T_INT: return config_read_int(name, key, v, CONFIG_INT_INTEGRAL, (int *)dst);
    case CONFIG_T_INT_OR_NULL:
        if (json_is_null(v)) {
            *(int *)dst = null_value;
            return ATTN_STATUS_OK;
        }
        return config_read_int(name, key, v, CONFIG_INT_INTEGRAL_OR_NULL, (int *)dst);
    case CONFIG_T_FLOAT: return config_read_float(name, key, v, false, (float *)dst);
    default: return config_read_bool(name, key, v, (bool *)dst);
    }
}

json_t *config_json_typed(int type, const void *src, int null_value) {
    switch (type) {
    case CONFIG_T_INT: return json_integer(*(const int *)src);
    case CONFIG_T_INT_OR_NULL: {
        const int x = *(const int *)src;
        return x == null_value ? json_null() : json_integer(x);
    }
    case CONFIG_T_FLOAT: return config_json_float(*(const float *)src);
    default: return json_boolean(*(const bool *)src);
    }
}

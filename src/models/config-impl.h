/* config-impl.h — the JSON field readers and writers the model configurations share
 * (bert_config.c, gpt_config.c, encdec_config.c). Every failure names the file (or source) and
 * the field. Internal to the library. */
#ifndef ATTN_MODELS_CONFIG_IMPL_H
#define ATTN_MODELS_CONFIG_IMPL_H

#include "attn_core.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* One field of a configuration struct: its JSON key, a reader type (the file's own enum) and its
 * offset in the struct. */
typedef struct {
    const char *name;
    int type;
    size_t off;
} config_field;
#define CONFIG_FIELD(T, n, t) {#n, t, offsetof(T, n)}

/* How config_read_int takes a value and words its refusals. */
typedef enum {
    CONFIG_INT_STRICT,   /* a JSON integer within int32, else FORMAT "must be a 32-bit integer" */
    CONFIG_INT_INTEGRAL, /* also an integral real (12.0, as some writers emit), same message */
    CONFIG_INT_INTEGRAL_OR_NULL, /* the same; the message says "... 32-bit integer or null" (the
                                  * caller handles null itself) */
    CONFIG_INT_SIZE,     /* a JSON integer: FORMAT "must be an integer"; above int32 TOO_LARGE
                          * "= N is absurdly large", below FORMAT "= N is out of range" */
} config_int_kind;

/* Loads the JSON file path (flags: jansson's decoding flags) into *root: a missing or unreadable
 * file is IO "PATH: cannot read model config: ...", bad JSON FORMAT "PATH:L:C: invalid JSON: ...",
 * and anything but an object FORMAT "PATH: model config must be a JSON object". */
attn_status config_json_load(const char *path, size_t flags, json_t **root);
/* The same for text in memory, named `name` in messages. */
attn_status config_json_loads(const char *text, const char *name, json_t **root);
/* FORMAT "NAME: model config must be a JSON object" unless root is one. */
attn_status config_json_need_object(const json_t *root, const char *name);

/* Field readers: value v of field `key` of the config `name`. */
attn_status config_read_int(const char *name, const char *key, const json_t *v,
                            config_int_kind kind, int *out);
/* A JSON number ("must be a number"); with float_range, also |x| <= FLT_MAX ("must be a number
 * within float range, got X"). */
attn_status config_read_float(const char *name, const char *key, const json_t *v,
                              bool float_range, float *out);
attn_status config_read_bool(const char *name, const char *key, const json_t *v, bool *out);
/* A JSON string ("must be a string"); *out borrows v's text. */
attn_status config_read_string(const char *name, const char *key, const json_t *v,
                               const char **out);

/* Table-driven configurations: a field's value v read into dst by type — CONFIG_T_INT (an
 * integral number), CONFIG_T_INT_OR_NULL (the same, or null: *dst = null_value), CONFIG_T_FLOAT
 * (a number), CONFIG_T_BOOL — and written back (an int equal to null_value is written as null). */
enum { CONFIG_T_INT, CONFIG_T_INT_OR_NULL, CONFIG_T_FLOAT, CONFIG_T_BOOL };
attn_status config_read_typed(const char *name, const char *key, const json_t *v, int type,
                              void *dst, int null_value);
json_t *config_json_typed(int type, const void *src, int null_value);

/* ---- checks of a configuration struct; WHAT names the model in messages ("bert", "gpt", ...) */

/* A size field (name, value v) that must be in [1, max] (max 0: no upper bound). */
typedef struct {
    const char *name;
    int v, max;
} config_size;
/* INVALID_ARGUMENT "WHAT config: NAME must be > 0 (got V)" or TOO_LARGE "WHAT config: NAME = V is
 * TOO_LARGE (limit MAX)" (too_large: the wording, e.g. "too large") for the first bad size. */
attn_status config_check_sizes(const char *what, const config_size *sz, size_t n,
                               const char *too_large);
/* A probability in [0, 1): else "WHAT config: NAME must be in [0, 1) (got V)". */
attn_status config_check_prob(const char *what, const char *name, float v);
/* A finite v > 0 (nonneg: v >= 0): else "WHAT config: NAME must be > 0 (got V)" (">= 0"). */
attn_status config_check_positive(const char *what, const char *name, float v, bool nonneg);

/* Re-raise the last error (the check's message, which names the field) prefixed "NAME: ". */
attn_status config_prefix_error(attn_status s, const char *name);

/* A float as the shortest decimal that reads back to it (0.1f saves as 0.1, not 0.10000000149). */
json_t *config_json_float(float x);
/* Writes o (taken over: always json_decref'ed) as indented JSON beside path and renames it over
 * path, so that a reader never sees half a file. */
attn_status config_json_save(json_t *o, const char *path);

#endif

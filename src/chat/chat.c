/* chat.c — the public API of attn_chat.h: templates (parse, load from a model directory),
 * conversations (JSON, validated), rendering, assistant spans and chat JSONL.
 *
 * A render runs in its own arena under one setjmp (run_protected): the interpreter fails by
 * longjmp, and everything it allocated goes with the arena. Conversations are jansson arrays,
 * converted into interpreter values at each render. */
#include "chat-impl.h"

#include "attn_tok.h" /* attn_tok_utf8_check */

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct attn_chat_template {
    ch_tree tree;
    char *name, *src;
    json_t *tokens; /* object: special-token name -> string (or list of strings) */
};

struct attn_chat_conv {
    json_t *msgs; /* array of message objects */
};

static const char *const TOKEN_KEYS[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                         "pad_token", "cls_token", "mask_token", NULL};

static char *dupn(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = '\0';
    return d;
}

/* Runs fn(e, ctx) with e's jump buffer set; the failure's status, or OK. (The function holding
 * the setjmp changes none of its own locals, so none is indeterminate after a longjmp.) */
static attn_status run_protected(ch_err *e, void (*fn)(ch_err *, void *), void *ctx) {
    if (setjmp(e->jb)) return e->status;
    fn(e, ctx);
    return ATTN_STATUS_OK;
}

/* ---- templates ------------------------------------------------------------------------------ */

typedef struct {
    attn_chat_template *t;
    size_t len;
} parse_job;

static void parse_fn(ch_err *e, void *ctx) {
    parse_job *j = ctx;
    ch_parse(e, j->t->name, j->t->src, j->len, &j->t->tree);
}

attn_status attn_chat_template_parse(const char *src, size_t len, const char *name,
                                     attn_chat_template **out) {
    if (!out || !src) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_template_parse: NULL argument");
    *out = NULL;
    if (!name) name = "chat template";
    if (len == SIZE_MAX) len = strlen(src);
    if (len > ATTN_CHAT_MAX_TEMPLATE)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: %zu bytes, more than the %zu a chat template may have",
                         name, len, ATTN_CHAT_MAX_TEMPLATE);
    size_t bad = attn_tok_utf8_check(src, len, false);
    if (bad < len)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s at byte %zu", name,
                         src[bad] ? "invalid UTF-8" : "a NUL byte", bad);
    attn_chat_template *t = calloc(1, sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    t->name = dupn(name, strlen(name));
    t->src = dupn(src, len);
    t->tokens = json_object();
    if (!t->name || !t->src || !t->tokens) {
        attn_chat_template_free(t);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    t->tree.arena.budget = (size_t)64 * len + ((size_t)1 << 20);
    ch_err e;
    memset(&e, 0, sizeof e);
    e.arena = &t->tree.arena;
    parse_job j = {t, len};
    attn_status s = run_protected(&e, parse_fn, &j);
    if (s) {
        attn_chat_template_free(t);
        return attn_fail(s, "%s", e.msg);
    }
    *out = t;
    return ATTN_STATUS_OK;
}

void attn_chat_template_free(attn_chat_template *t) {
    if (!t) return;
    ch_arena_free(&t->tree.arena);
    json_decref(t->tokens);
    free(t->name);
    free(t->src);
    free(t);
}

attn_status attn_chat_template_set_token(attn_chat_template *t, const char *name, const char *value) {
    if (!t || !name) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_template_set_token: NULL argument");
    if (!value) {
        json_object_del(t->tokens, name);
        return ATTN_STATUS_OK;
    }
    size_t n = strlen(value);
    if (attn_tok_utf8_check(value, n, false) < n)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "special token %s: invalid UTF-8", name);
    if (json_object_set_new(t->tokens, name, json_stringn(value, n)))
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    return ATTN_STATUS_OK;
}

const char *attn_chat_template_token(const attn_chat_template *t, const char *name) {
    if (!t || !name) return NULL;
    return json_string_value(json_object_get(t->tokens, name));
}

const char *attn_chat_template_source(const attn_chat_template *t) { return t ? t->src : NULL; }
const char *attn_chat_template_name(const attn_chat_template *t) { return t ? t->name : NULL; }

/* the whole file (at most max bytes), NUL-terminated; NULL with *missing when it does not exist */
static attn_status read_file(const char *path, size_t max, char **out, size_t *len, bool *missing) {
    *out = NULL, *missing = false;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) {
            *missing = true;
            return ATTN_STATUS_OK;
        }
        return attn_fail(ATTN_STATUS_IO, "%s: %s", path, strerror(errno));
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        if (n == cap) {
            if (cap > max) {
                free(b);
                fclose(f);
                return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: larger than %zu bytes", path, max);
            }
            char *nb = realloc(b, 2 * cap);
            if (!nb) break;
            b = nb, cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (!b) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    if (err) {
        free(b);
        return attn_fail(ATTN_STATUS_IO, "%s: read error", path);
    }
    if (n > max) {
        free(b);
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: larger than %zu bytes", path, max);
    }
    char *nb = realloc(b, n + 1);
    if (nb) b = nb;
    else if (n == cap) {
        free(b);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    b[n] = '\0';
    *out = b, *len = n;
    return ATTN_STATUS_OK;
}

/* a special token's string: a string, or an AddedToken object {"content": S} */
static const char *token_string(json_t *v) {
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

#define CONFIG_MAX ((size_t)64 << 20)

attn_status attn_chat_template_load_dir(const char *dir, const char *which, attn_chat_template **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_template_load_dir: NULL argument");
    *out = NULL;
    const char *want = which ? which : "default";
    char path[4200], jpath[4200], tpath[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    snprintf(jpath, sizeof jpath, "%s/chat_template.jinja", dir);
    snprintf(tpath, sizeof tpath, "%s/chat_template.json", dir);
    char *text = NULL, *jinja = NULL;
    size_t len = 0, jlen = 0;
    bool missing, jmissing;
    attn_status s = read_file(path, CONFIG_MAX, &text, &len, &missing);
    if (s) return s;
    json_t *cfg = NULL;
    if (text) {
        json_error_t err;
        cfg = json_loadb(text, len, JSON_ALLOW_NUL, &err);
        free(text);
        if (!cfg || !json_is_object(cfg)) {
            json_decref(cfg);
            return cfg ? attn_fail(ATTN_STATUS_FORMAT, "%s: not a JSON object", path)
                       : attn_fail(ATTN_STATUS_FORMAT, "%s:%d:%d: %s", path, err.line, err.column, err.text);
        }
    }
    s = read_file(jpath, ATTN_CHAT_MAX_TEMPLATE, &jinja, &jlen, &jmissing);
    if (s) {
        json_decref(cfg);
        return s;
    }
    const char *src = NULL, *name = NULL;
    size_t src_len = 0;
    json_t *tj = NULL;
    char namebuf[4400];
    if (jinja && !which) { /* newer transformers save the template beside the configuration */
        src = jinja, src_len = jlen, name = jpath;
    } else if (cfg && json_object_get(cfg, "chat_template")) {
        json_t *ct = json_object_get(cfg, "chat_template");
        if (json_is_string(ct)) {
            if (which && strcmp(which, "default")) goto no_name;
            src = json_string_value(ct), src_len = json_string_length(ct);
        } else if (json_is_array(ct)) {
            size_t i;
            json_t *it;
            json_array_foreach(ct, i, it) {
                const char *nm = json_string_value(json_object_get(it, "name"));
                json_t *tv = json_object_get(it, "template");
                if (!nm || !json_is_string(tv)) {
                    json_decref(cfg);
                    free(jinja);
                    return attn_fail(ATTN_STATUS_FORMAT,
                                     "%s: chat_template[%zu] is not {\"name\": string, \"template\": string}", path, i);
                }
                if (!strcmp(nm, want)) src = json_string_value(tv), src_len = json_string_length(tv);
            }
            if (!src) goto no_name;
        } else if (!json_is_null(ct)) {
            json_decref(cfg);
            free(jinja);
            return attn_fail(ATTN_STATUS_FORMAT, "%s: chat_template is neither a string nor a list of named templates", path);
        }
        snprintf(namebuf, sizeof namebuf, "%s[chat_template%s%s]", path, which ? ":" : "", which ? which : "");
        name = namebuf;
    }
    if (!src && !which) {
        char *t2 = NULL;
        size_t l2 = 0;
        bool m2;
        s = read_file(tpath, CONFIG_MAX, &t2, &l2, &m2);
        if (s) {
            json_decref(cfg);
            free(jinja);
            return s;
        }
        if (t2) {
            json_error_t err;
            tj = json_loadb(t2, l2, JSON_ALLOW_NUL, &err);
            free(t2);
            json_t *ct = json_object_get(tj, "chat_template");
            if (!json_is_string(ct)) {
                json_decref(tj);
                json_decref(cfg);
                free(jinja);
                return attn_fail(ATTN_STATUS_FORMAT, "%s: no \"chat_template\" string", tpath);
            }
            src = json_string_value(ct), src_len = json_string_length(ct), name = tpath;
        }
    }
    if (!src) {
        json_decref(cfg);
        free(jinja);
        return attn_fail(ATTN_STATUS_NOT_FOUND,
                         "%s: no chat template (tokenizer_config.json has no \"chat_template\" and there is "
                         "no chat_template.jinja or chat_template.json)", dir);
    }
    attn_chat_template *t;
    s = attn_chat_template_parse(src, src_len, name, &t);
    free(jinja);
    json_decref(tj);
    if (s) {
        json_decref(cfg);
        return s;
    }
    /* special tokens */
    for (int i = 0; cfg && TOKEN_KEYS[i]; i++) {
        const char *v = token_string(json_object_get(cfg, TOKEN_KEYS[i]));
        if (v && *v && (s = attn_chat_template_set_token(t, TOKEN_KEYS[i], v))) goto fail;
    }
    json_t *extra = cfg ? json_object_get(cfg, "additional_special_tokens") : NULL;
    if (json_is_array(extra) && json_array_size(extra)) {
        json_t *l = json_array();
        size_t i;
        json_t *it;
        json_array_foreach(extra, i, it) {
            const char *v = token_string(it);
            if (v && attn_tok_utf8_check(v, strlen(v), false) == strlen(v)) json_array_append_new(l, json_string(v));
        }
        json_object_set_new(t->tokens, "additional_special_tokens", l);
    }
    json_decref(cfg);
    *out = t;
    return ATTN_STATUS_OK;
fail:
    json_decref(cfg);
    attn_chat_template_free(t);
    return s;
no_name:
    json_decref(cfg);
    free(jinja);
    return attn_fail(ATTN_STATUS_NOT_FOUND, "%s: no chat template named \"%s\"", path, want);
}

/* ---- conversations -------------------------------------------------------------------------- */

static const char *const ROLES[] = {"system", "user", "assistant", "tool", NULL};

/* what is wrong with msgs as a conversation (into why), or false when nothing */
static bool conv_problem(json_t *msgs, char *why, size_t cap) {
    if (!json_is_array(msgs)) return snprintf(why, cap, "not a JSON array of messages"), true;
    if (json_array_size(msgs) == 0) return snprintf(why, cap, "an empty conversation"), true;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) return snprintf(why, cap, "message %zu is not an object", i), true;
        json_t *r = json_object_get(m, "role");
        if (!json_is_string(r)) return snprintf(why, cap, "message %zu has no \"role\" string", i), true;
        const char *role = json_string_value(r);
        bool known = false;
        for (int k = 0; ROLES[k]; k++) known = known || !strcmp(role, ROLES[k]);
        if (!known)
            return snprintf(why, cap, "message %zu: unknown role \"%.40s\" (system, user, assistant or tool)", i, role), true;
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c)) continue;
        if ((!c || json_is_null(c)) && !strcmp(role, "assistant") && json_object_get(m, "tool_calls")) continue;
        if (json_is_array(c)) {
            size_t k;
            json_t *part;
            json_array_foreach(c, k, part) {
                const char *ty = json_string_value(json_object_get(part, "type"));
                if (!json_is_object(part) || !ty || strcmp(ty, "text") || !json_is_string(json_object_get(part, "text")))
                    return snprintf(why, cap, "message %zu: content part %zu is not {\"type\": \"text\", \"text\": string}", i, k), true;
            }
            continue;
        }
        return snprintf(why, cap, "message %zu: content is not a string (or a list of text parts)", i), true;
    }
    return false;
}

static attn_status conv_from_text(const char *json, size_t len, const char *where, attn_chat_conv **out) {
    size_t bad = attn_tok_utf8_check(json, len, true);
    if (bad < len) return attn_fail(ATTN_STATUS_FORMAT, "%s: invalid UTF-8 at byte %zu", where, bad);
    json_error_t err;
    json_t *j = json_loadb(json, len, JSON_ALLOW_NUL, &err);
    if (!j) return attn_fail(ATTN_STATUS_FORMAT, "%s: invalid JSON at column %d: %s", where, err.column, err.text);
    char why[200];
    if (conv_problem(j, why, sizeof why)) {
        json_decref(j);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s", where, why);
    }
    attn_chat_conv *c = malloc(sizeof *c);
    if (!c) {
        json_decref(j);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    c->msgs = j;
    *out = c;
    return ATTN_STATUS_OK;
}

attn_status attn_chat_conv_parse(const char *json, size_t len, attn_chat_conv **out) {
    if (!json || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_conv_parse: NULL argument");
    *out = NULL;
    if (len == SIZE_MAX) len = strlen(json);
    return conv_from_text(json, len, "messages", out);
}

attn_status attn_chat_conv_new(attn_chat_conv **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_conv_new: NULL argument");
    *out = malloc(sizeof **out);
    if (!*out || !((*out)->msgs = json_array())) {
        free(*out);
        *out = NULL;
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    return ATTN_STATUS_OK;
}

attn_status attn_chat_conv_add(attn_chat_conv *c, const char *role, const char *content, size_t len) {
    if (!c || !role || !content) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_conv_add: NULL argument");
    bool known = false;
    for (int k = 0; ROLES[k]; k++) known = known || !strcmp(role, ROLES[k]);
    if (!known) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "unknown role \"%.40s\" (system, user, assistant or tool)", role);
    if (len == SIZE_MAX) len = strlen(content);
    size_t bad = attn_tok_utf8_check(content, len, true);
    if (bad < len) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "message content: invalid UTF-8 at byte %zu", bad);
    json_t *m = json_pack("{s:s,s:s%}", "role", role, "content", content, len);
    if (!m || json_array_append_new(c->msgs, m)) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    return ATTN_STATUS_OK;
}

size_t attn_chat_conv_len(const attn_chat_conv *c) { return c ? json_array_size(c->msgs) : 0; }

const char *attn_chat_conv_role(const attn_chat_conv *c, size_t i) {
    return c ? json_string_value(json_object_get(json_array_get(c->msgs, i), "role")) : NULL;
}

const char *attn_chat_conv_content(const attn_chat_conv *c, size_t i) {
    return c ? json_string_value(json_object_get(json_array_get(c->msgs, i), "content")) : NULL;
}

attn_status attn_chat_conv_prefix(const attn_chat_conv *c, size_t n, attn_chat_conv **out) {
    if (!c || !out || n > json_array_size(c->msgs))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_conv_prefix: bad argument");
    attn_status s = attn_chat_conv_new(out);
    if (s) return s;
    for (size_t i = 0; i < n; i++)
        if (json_array_append(( *out)->msgs, json_array_get(c->msgs, i))) {
            attn_chat_conv_free(*out);
            *out = NULL;
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        }
    return ATTN_STATUS_OK;
}

void attn_chat_conv_free(attn_chat_conv *c) {
    if (!c) return;
    json_decref(c->msgs);
    free(c);
}

/* ---- rendering ------------------------------------------------------------------------------ */

attn_chat_render_params attn_chat_default_render_params(void) {
    attn_chat_render_params p;
    memset(&p, 0, sizeof p);
    p.max_output = (size_t)64 << 20;
    p.max_memory = (size_t)512 << 20;
    p.max_steps = 10000000;
    p.max_depth = 200;
    return p;
}

static ch_val from_json(ch_err *e, json_t *j, int depth) {
    if (depth > 1000) ch_fail(e, ATTN_STATUS_TOO_LARGE, "JSON nested deeper than 1000");
    switch (json_typeof(j)) {
    case JSON_NULL: return ch_none();
    case JSON_TRUE: return ch_bool(true);
    case JSON_FALSE: return ch_bool(false);
    case JSON_INTEGER: return ch_int((int64_t)json_integer_value(j));
    case JSON_REAL: return ch_float(json_real_value(j));
    case JSON_STRING: return ch_strn(e, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        ch_list *l = ch_list_new(e, json_array_size(j));
        for (size_t i = 0; i < l->n; i++) l->v[i] = from_json(e, json_array_get(j, i), depth + 1);
        ch_val v = {CV_LIST, 0, {.l = l}};
        return v;
    }
    case JSON_OBJECT: {
        ch_dict *d = ch_dict_new(e, json_object_size(j));
        const char *k;
        json_t *x;
        json_object_foreach(j, k, x) {
            ch_val key = {CV_STR, 0, {.s = ch_str_new(e, k, strlen(k))}};
            /* keys are unique in a jansson object: append without the lookup */
            d->k[d->n] = key;
            d->v[d->n] = from_json(e, x, depth + 1);
            d->n++;
        }
        ch_val v = {CV_DICT, 0, {.d = d}};
        return v;
    }
    }
    return ch_none();
}

typedef struct {
    const attn_chat_template *t;
    json_t *msgs; /* array */
    json_t *extra;
    const attn_chat_render_params *p;
    bool agp;
    ch_buf out;
} render_job;

static void render_fn(ch_err *e, void *ctx) {
    render_job *j = ctx;
    ch_cx cx;
    memset(&cx, 0, sizeof cx);
    cx.e = e, cx.p = j->p, cx.name = j->t->name;
    cx.now = j->p->now ? j->p->now : (int64_t)time(NULL);
    j->out.max = j->p->max_output;
    cx.out = &j->out;
    ch_frame *root = ch_frame_new(&cx);
    ch_frame_set(&cx, root, "messages", from_json(e, j->msgs, 0));
    ch_frame_set(&cx, root, "tools", ch_none());
    ch_frame_set(&cx, root, "documents", ch_none());
    ch_frame_set(&cx, root, "add_generation_prompt", ch_bool(j->agp));
    const char *k;
    json_t *x;
    json_object_foreach(j->t->tokens, k, x) ch_frame_set(&cx, root, k, from_json(e, x, 0));
    if (j->extra) json_object_foreach(j->extra, k, x) {
            size_t n = strlen(k) + 1;
            char *name = ch_alloc(e, n);
            memcpy(name, k, n);
            ch_frame_set(&cx, root, name, from_json(e, x, 0));
        }
    ch_exec(&cx, &j->t->tree, root);
}

static attn_status render_json(const attn_chat_template *t, json_t *msgs, json_t *extra,
                               const attn_chat_render_params *p, bool agp, char **out, size_t *out_len) {
    ch_arena arena = {NULL, 0, p->max_memory};
    ch_err e;
    memset(&e, 0, sizeof e);
    e.arena = &arena;
    e.work_max = p->max_steps > UINT64_MAX / 256 ? UINT64_MAX : p->max_steps * 256;
    render_job j = {t, msgs, extra, p, agp, {NULL, 0, 0, 0}};
    attn_status s = run_protected(&e, render_fn, &j);
    if (s) {
        ch_arena_free(&arena);
        size_t nl = strlen(t->name);
        if (e.raised || (!strncmp(e.msg, t->name, nl) && e.msg[nl] == ':')) return attn_fail(s, "%s", e.msg);
        return attn_fail(s, "%s: %s", t->name, e.msg);
    }
    char *r = malloc(j.out.n + 1);
    if (!r) {
        ch_arena_free(&arena);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory (%zu bytes of rendered text)", j.out.n);
    }
    if (j.out.n) memcpy(r, j.out.p, j.out.n);
    r[j.out.n] = '\0';
    ch_arena_free(&arena);
    *out = r;
    if (out_len) *out_len = j.out.n;
    return ATTN_STATUS_OK;
}

static attn_status check_params(const attn_chat_render_params *p, json_t **extra) {
    *extra = NULL;
    if (p->max_output == 0 || p->max_memory == 0 || p->max_steps == 0 || p->max_depth <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_chat_render_params: the limits must be positive (start from attn_chat_default_render_params)");
    if (p->extra_json) {
        size_t n = strlen(p->extra_json);
        if (attn_tok_utf8_check(p->extra_json, n, true) < n)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "extra variables: invalid UTF-8");
        json_error_t err;
        json_t *x = json_loadb(p->extra_json, n, JSON_ALLOW_NUL, &err);
        if (!x) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "extra variables: invalid JSON at column %d: %s", err.column, err.text);
        if (!json_is_object(x)) {
            json_decref(x);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "extra variables: not a JSON object");
        }
        /* apply_chat_template passes these itself (a second value is Python's TypeError) */
        if (json_object_get(x, "messages") || json_object_get(x, "add_generation_prompt")) {
            json_decref(x);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "extra variables: \"messages\" and \"add_generation_prompt\" are set by the render itself");
        }
        *extra = x;
    }
    return ATTN_STATUS_OK;
}

attn_status attn_chat_render(const attn_chat_template *t, const attn_chat_conv *c,
                             const attn_chat_render_params *p, char **out, size_t *out_len) {
    if (!t || !c || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_render: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    attn_chat_render_params d = attn_chat_default_render_params();
    if (!p) p = &d;
    json_t *extra;
    attn_status s = check_params(p, &extra);
    if (s) return s;
    s = render_json(t, c->msgs, extra, p, p->add_generation_prompt, out, out_len);
    json_decref(extra);
    return s;
}

/* ---- assistant spans ------------------------------------------------------------------------ */

attn_status attn_chat_assistant_spans(const attn_chat_template *t, const attn_chat_conv *c,
                                      const attn_chat_render_params *p, char **text, size_t *text_len,
                                      attn_chat_span **spans, size_t *n_spans) {
    if (!t || !c || !text || !spans || !n_spans)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_assistant_spans: NULL argument");
    *text = NULL, *spans = NULL, *n_spans = 0;
    if (text_len) *text_len = 0;
    attn_chat_render_params d = attn_chat_default_render_params();
    if (!p) p = &d;
    json_t *extra;
    attn_status s = check_params(p, &extra);
    if (s) return s;
    char *full = NULL, *pre = NULL, *upto = NULL;
    size_t flen = 0, plen = 0, ulen = 0, n = json_array_size(c->msgs), k = 0;
    attn_chat_span *sp = NULL;
    json_t *prefix = json_array();
    if (!prefix) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((s = render_json(t, c->msgs, extra, p, false, &full, &flen))) goto done;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(c->msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && !strcmp(role, "assistant")) {
            if ((s = render_json(t, prefix, extra, p, true, &pre, &plen))) goto done;
            json_array_append(prefix, m);
            if ((s = render_json(t, prefix, extra, p, false, &upto, &ulen))) goto done;
            if (plen > ulen || memcmp(pre, upto, plen)) {
                s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                              "%s: assistant message %zu: the conversation rendered up to it does not start with the "
                              "text before it (with add_generation_prompt): the template is not prefix-consistent",
                              t->name, i);
                goto done;
            }
            if (ulen > flen || memcmp(upto, full, ulen)) {
                s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                              "%s: assistant message %zu renders differently when later messages follow it: the "
                              "template is not prefix-consistent", t->name, i);
                goto done;
            }
            attn_chat_span *ns = realloc(sp, (k + 1) * sizeof *sp);
            if (!ns) {
                s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            sp = ns;
            sp[k].message = i, sp[k].begin = plen, sp[k].end = ulen;
            k++;
            free(pre), free(upto);
            pre = upto = NULL;
        } else {
            json_array_append(prefix, m);
        }
    }
done:
    json_decref(prefix);
    json_decref(extra);
    free(pre);
    free(upto);
    if (s) {
        free(full);
        free(sp);
        return s;
    }
    *text = full;
    if (text_len) *text_len = flen;
    *spans = sp, *n_spans = k;
    return ATTN_STATUS_OK;
}

/* ---- chat JSONL ----------------------------------------------------------------------------- */

struct attn_chat_jsonl {
    FILE *f;          /* a file, or NULL for memory */
    const char *data; /* memory */
    size_t n, pos;
    char *name;
    size_t line, max_line;
    char *buf;
    size_t cap;
};

attn_chat_jsonl_params attn_chat_jsonl_default_params(void) {
    attn_chat_jsonl_params p = {(size_t)64 << 20};
    return p;
}

static attn_status jsonl_new(const char *name, const attn_chat_jsonl_params *p, attn_chat_jsonl **out) {
    attn_chat_jsonl *r = calloc(1, sizeof *r);
    if (!r || !(r->name = dupn(name, strlen(name)))) {
        free(r);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    r->max_line = p && p->max_line ? p->max_line : attn_chat_jsonl_default_params().max_line;
    *out = r;
    return ATTN_STATUS_OK;
}

attn_status attn_chat_jsonl_open(const char *path, const attn_chat_jsonl_params *p, attn_chat_jsonl **out) {
    if (!path || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_jsonl_open: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return attn_fail(ATTN_STATUS_IO, "%s: %s", path, strerror(errno));
    attn_status s = jsonl_new(path, p, out);
    if (s) {
        fclose(f);
        return s;
    }
    (*out)->f = f;
    return ATTN_STATUS_OK;
}

attn_status attn_chat_jsonl_open_mem(const char *data, size_t n, const char *name,
                                     const attn_chat_jsonl_params *p, attn_chat_jsonl **out) {
    if ((!data && n) || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_jsonl_open_mem: NULL argument");
    *out = NULL;
    attn_status s = jsonl_new(name ? name : "chat JSONL", p, out);
    if (s) return s;
    (*out)->data = data, (*out)->n = n;
    return ATTN_STATUS_OK;
}

/* the next line (without its '\n') into r->buf: 1, 0 at the end, -1 too long (skipped) */
static int next_line(attn_chat_jsonl *r, size_t *len) {
    size_t n = 0;
    bool over = false, any = false;
    for (;;) {
        int c;
        if (r->f) {
            c = getc(r->f);
            if (c == EOF) break;
        } else {
            if (r->pos >= r->n) break;
            c = (unsigned char)r->data[r->pos++];
        }
        any = true;
        if (c == '\n') break;
        if (over) continue;
        if (n >= r->max_line) {
            over = true;
            continue;
        }
        if (n + 1 >= r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 4096;
            char *b = realloc(r->buf, cap);
            if (!b) return -2;
            r->buf = b, r->cap = cap;
        }
        r->buf[n++] = (char)c;
    }
    if (!any) return 0;
    r->line++;
    if (over) return -1;
    if (!r->buf) {
        r->buf = malloc(1);
        if (!r->buf) return -2;
        r->cap = 1;
    }
    r->buf[n] = '\0';
    *len = n;
    return 1;
}

attn_status attn_chat_jsonl_next(attn_chat_jsonl *r, attn_chat_conv **conv) {
    if (!r || !conv) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_chat_jsonl_next: NULL argument");
    *conv = NULL;
    for (;;) {
        size_t len = 0;
        int got = next_line(r, &len);
        if (got == 0) {
            if (r->f && ferror(r->f)) return attn_fail(ATTN_STATUS_IO, "%s: read error", r->name);
            return ATTN_STATUS_OK;
        }
        if (got == -2) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s:%zu: out of memory", r->name, r->line);
        if (got == -1)
            return attn_fail(ATTN_STATUS_FORMAT, "%s:%zu: line longer than %zu bytes", r->name, r->line, r->max_line);
        size_t i = 0;
        while (i < len && (r->buf[i] == ' ' || r->buf[i] == '\t' || r->buf[i] == '\r')) i++;
        if (i == len) continue; /* blank */
        char where[4200];
        snprintf(where, sizeof where, "%s:%zu", r->name, r->line);
        return conv_from_text(r->buf, len, where, conv);
    }
}

size_t attn_chat_jsonl_line(const attn_chat_jsonl *r) { return r ? r->line : 0; }

void attn_chat_jsonl_close(attn_chat_jsonl *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->buf);
    free(r->name);
    free(r);
}

/* post.c — what happens after the model: truncation, the post-processor's special tokens and
 * type ids, padding; the "truncation", "padding" and "post_processor" fields of tokenizer.json;
 * attn_tok_encode_ex and attn_tok_encode_batch.
 *
 * Order and arithmetic follow tokenizers' TokenizerImpl::post_process exactly:
 *   1. truncation of the texts' ids to max_length minus the special tokens the post-processor
 *      will add (tokenizers subtracts in unsigned arithmetic: when the special tokens outnumber
 *      max_length the subtraction wraps and nothing is truncated; reproduced). LongestFirst with
 *      a pair keeps n1 = min(len1, max(max_length - len2, ...)) as truncate_encodings does:
 *      the shorter text keeps its length if the longer can absorb the cut, else both get
 *      max_length / 2 (the second one the odd token). OnlyFirst / OnlySecond cut one text, and
 *      fail when it is too short or (OnlySecond) absent. max_length 0 empties both.
 *   2. the template: special tokens (type id and special mask from the template) around the
 *      sequences A and B, whose tokens take the template's type id; without special tokens the
 *      sequences alone, still in template order with its type ids. No post-processor: A with
 *      type 0, B with type 1.
 *   3. padding (right or left) with pad_id / pad_type_id, attention 0 and special mask 1, to a
 *      fixed length or the batch's longest, rounded up to pad_to_multiple_of; never shortens. */
#include "tok-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static attn_status oom(const char *what) {
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* ---- parsing ---- */

static attn_status side_of(json_t *v, const char *name, const char *path, int *side) {
    *side = ATTN_TOK_RIGHT;
    if (!v) return ATTN_STATUS_OK;
    if (tok_json_str_is(v, "Right")) return ATTN_STATUS_OK; /* whole length: no NUL inside */
    if (tok_json_str_is(v, "Left")) {
        *side = ATTN_TOK_LEFT;
        return ATTN_STATUS_OK;
    }
    return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: expected \"Right\" or \"Left\"", name, path);
}

static attn_status uint_field(json_t *obj, const char *key, bool required, const char *name,
                              const char *path, size_t *out) {
    json_t *v = json_object_get(obj, key);
    if (!v && !required) return ATTN_STATUS_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > (json_int_t)TOK_MAX_ID)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.%s: %s", name, path, key,
                         v ? "expected an integer in [0, 2^24)" : "missing");
    *out = (size_t)json_integer_value(v);
    return ATTN_STATUS_OK;
}

attn_status tok_trunc_pad_parse(attn_tok *t, json_t *root, const char *name) {
    json_t *tr = json_object_get(root, "truncation");
    attn_status st;
    if (tr && !json_is_null(tr)) {
        if (!json_is_object(tr))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: truncation: expected an object or null",
                             name);
        tok_trunc_cfg *c = &t->trunc;
        if ((st = uint_field(tr, "max_length", true, name, "truncation", &c->max_length)) ||
            (st = uint_field(tr, "stride", true, name, "truncation", &c->stride)) ||
            (st = side_of(json_object_get(tr, "direction"), name, "truncation.direction",
                          &c->direction)))
            return st;
        json_t *s = json_object_get(tr, "strategy");
        if (tok_json_str_is(s, "LongestFirst"))
            c->strategy = ATTN_TOK_TRUNCATE_LONGEST_FIRST;
        else if (tok_json_str_is(s, "OnlyFirst"))
            c->strategy = ATTN_TOK_TRUNCATE_ONLY_FIRST;
        else if (tok_json_str_is(s, "OnlySecond"))
            c->strategy = ATTN_TOK_TRUNCATE_ONLY_SECOND;
        else
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: truncation.strategy: expected \"LongestFirst\", \"OnlyFirst\" or "
                             "\"OnlySecond\"",
                             name);
        c->on = true;
    }
    json_t *pd = json_object_get(root, "padding");
    if (pd && !json_is_null(pd)) {
        if (!json_is_object(pd))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: padding: expected an object or null", name);
        tok_pad_cfg *c = &t->pad;
        json_t *s = json_object_get(pd, "strategy");
        if (tok_json_str_is(s, "BatchLongest")) {
            c->fixed = false;
        } else if (json_is_object(s) && json_object_size(s) == 1 && json_object_get(s, "Fixed")) {
            c->fixed = true;
            if ((st = uint_field(s, "Fixed", true, name, "padding.strategy", &c->length)))
                return st;
        } else {
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: padding.strategy: expected \"BatchLongest\" or {\"Fixed\": N}",
                             name);
        }
        size_t pid = 0, ptid = 0;
        json_t *m = json_object_get(pd, "pad_to_multiple_of");
        if (m && !json_is_null(m) &&
            (st = uint_field(pd, "pad_to_multiple_of", true, name, "padding", &c->multiple)))
            return st;
        if ((st = side_of(json_object_get(pd, "direction"), name, "padding.direction",
                          &c->direction)) ||
            (st = uint_field(pd, "pad_id", false, name, "padding", &pid)) ||
            (st = uint_field(pd, "pad_type_id", false, name, "padding", &ptid)))
            return st;
        c->pad_id = (int32_t)pid;
        c->pad_type_id = (int32_t)ptid;
        json_t *tok = json_object_get(pd, "pad_token");
        if (tok && !json_is_string(tok))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: padding.pad_token: expected a string", name);
        c->pad_token_len = tok ? json_string_length(tok) : 5;
        if (tok && (st = tok_no_nul(json_string_value(tok), c->pad_token_len, name,
                                    "padding.pad_token")))
            return st;
        c->pad_token = dup_n(tok ? json_string_value(tok) : "[PAD]", c->pad_token_len);
        if (!c->pad_token) return oom(name);
        c->on = true;
    }
    return ATTN_STATUS_OK;
}

static const char *side_name(int side) { return side == ATTN_TOK_LEFT ? "Left" : "Right"; }

void tok_trunc_pad_save(const attn_tok *t, tok_buf *b) {
    if (t->trunc.on) {
        static const char *const strat[] = {"LongestFirst", "LongestFirst", "OnlyFirst",
                                            "OnlySecond"};
        tok_buf_printf(b,
                       "  \"truncation\": {\"direction\": \"%s\", \"max_length\": %zu, "
                       "\"strategy\": \"%s\", \"stride\": %zu},\n",
                       side_name(t->trunc.direction), t->trunc.max_length,
                       strat[t->trunc.strategy & 3], t->trunc.stride);
    } else {
        tok_buf_puts(b, "  \"truncation\": null,\n");
    }
    if (t->pad.on) {
        tok_buf_puts(b, "  \"padding\": {\"strategy\": ");
        if (t->pad.fixed)
            tok_buf_printf(b, "{\"Fixed\": %zu}", t->pad.length);
        else
            tok_buf_puts(b, "\"BatchLongest\"");
        tok_buf_printf(
            b, ", \"direction\": \"%s\", \"pad_to_multiple_of\": ", side_name(t->pad.direction));
        if (t->pad.multiple)
            tok_buf_printf(b, "%zu", t->pad.multiple);
        else
            tok_buf_puts(b, "null");
        tok_buf_printf(b, ", \"pad_id\": %ld, \"pad_type_id\": %ld, \"pad_token\": ",
                       (long)t->pad.pad_id, (long)t->pad.pad_type_id);
        tok_buf_json_str(b, t->pad.pad_token, t->pad.pad_token_len);
        tok_buf_puts(b, "},\n");
    } else {
        tok_buf_puts(b, "  \"padding\": null,\n");
    }
}

/* A special token of the template: name, ids, tokens. */
static attn_status add_special(attn_tok *t, const char *nm, size_t nmlen, const int32_t *ids,
                               const char *const *toks, const size_t *toklen, size_t n,
                               const char *name) {
    tok_tpl_special *arr = realloc(t->tpl_special, (t->n_tpl_special + 1) * sizeof *arr);
    if (!arr) return oom(name);
    t->tpl_special = arr;
    tok_tpl_special *s = &arr[t->n_tpl_special++];
    memset(s, 0, sizeof *s);
    s->name = dup_n(nm, nmlen);
    s->name_len = nmlen;
    s->ids = malloc((n ? n : 1) * sizeof *s->ids);
    s->tokens = calloc(n ? n : 1, sizeof *s->tokens);
    s->tok_len = malloc((n ? n : 1) * sizeof *s->tok_len);
    if (!s->name || !s->ids || !s->tokens || !s->tok_len) return oom(name);
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        s->ids[i] = ids[i];
        s->tok_len[i] = toklen[i];
        s->tokens[i] = dup_n(toks[i], toklen[i]);
        if (!s->tokens[i]) return oom(name);
    }
    return ATTN_STATUS_OK;
}

static attn_status parse_template(attn_tok *t, json_t *arr, bool pair, const char *name) {
    const char *which = pair ? "pair" : "single";
    if (!json_is_array(arr))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: post_processor.%s: expected an array", name,
                         which);
    size_t n = json_array_size(arr);
    tok_tpl_piece *pcs = calloc(n ? n : 1, sizeof *pcs);
    if (!pcs) return oom(name);
    if (pair) {
        t->tpl_pair = pcs;
        t->n_pair = n;
    } else {
        t->tpl_single = pcs;
        t->n_single = n;
    }
    int count[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        json_t *seq = json_object_get(e, "Sequence"), *sp = json_object_get(e, "SpecialToken");
        json_t *body = seq ? seq : sp;
        json_t *id = json_object_get(body, "id"), *ty = json_object_get(body, "type_id");
        if (!json_is_object(e) || json_object_size(e) != 1 || !json_is_object(body) ||
            !json_is_string(id) || !json_is_integer(ty) || json_integer_value(ty) < 0 ||
            json_integer_value(ty) > 1000000)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: post_processor.%s[%zu]: expected {\"Sequence\"|\"SpecialToken\": "
                             "{\"id\": string, \"type_id\": int}}",
                             name, which, i);
        pcs[i].type_id = (uint32_t)json_integer_value(ty);
        const char *ids = json_string_value(id);
        if (seq) {
            if (!tok_json_str_is(id, "A") && !tok_json_str_is(id, "B"))
                return attn_fail(ATTN_STATUS_FORMAT,
                                 "%s: post_processor.%s[%zu].Sequence.id: expected \"A\" or \"B\"",
                                 name, which, i);
            pcs[i].seq = ids[0] == 'B';
            count[pcs[i].seq]++;
            continue;
        }
        pcs[i].special = true;
        size_t k = 0;
        while (k < t->n_tpl_special &&
               (t->tpl_special[k].name_len != json_string_length(id) ||
                memcmp(t->tpl_special[k].name, ids, json_string_length(id))))
            k++;
        char q[64];
        if (k == t->n_tpl_special)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: post_processor.%s[%zu]: special token %s is not in "
                             "special_tokens",
                             name, which, i, tok_quote(q, sizeof q, ids, json_string_length(id)));
        pcs[i].index = k;
        if (pair)
            t->added_pair += t->tpl_special[k].n;
        else
            t->added_single += t->tpl_special[k].n;
    }
    if (pair ? (count[0] != 1 || count[1] != 1) : (count[0] != 1 || count[1] != 0))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: post_processor.%s: expected %s", name, which,
                         pair ? "the sequences A and B once each" : "the sequence A once (no B)");
    return ATTN_STATUS_OK;
}

/* BertProcessing's "sep" / "cls": [token, id]. */
static attn_status token_id_pair(json_t *v, const char *key, const char *name, const char **s,
                                 size_t *n, int32_t *id) {
    json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(a) || !json_is_integer(b) ||
        json_integer_value(b) < 0 || json_integer_value(b) > TOK_MAX_ID)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: post_processor.%s: expected [token, id]", name,
                         key);
    *s = json_string_value(a);
    *n = json_string_length(a);
    *id = (int32_t)json_integer_value(b);
    char path[64];
    snprintf(path, sizeof path, "post_processor.%s", key);
    return tok_no_nul(*s, *n, name, path);
}

/* One post-processor object (path names it in messages). A Sequence's steps are parsed in order,
 * one level deep (tokenizers' own files never nest them); ByteLevel steps only trim offsets, so
 * the ids come from the one TemplateProcessing or BertProcessing step, if any. */
static attn_status parse_post_one(attn_tok *t, json_t *obj, const char *name, const char *path,
                                  bool in_seq) {
    json_t *ty = json_object_get(obj, "type");
    if (!json_is_object(obj) || !json_is_string(ty))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: expected an object with a \"type\"", name,
                         path);
    attn_status st;
    if (!in_seq && tok_json_str_is(ty, "Sequence")) {
        json_t *list = json_object_get(obj, "processors");
        if (!json_is_array(list))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.processors: expected an array", name,
                             path);
        t->post_seq = true;
        char sub[96];
        for (size_t i = 0; i < json_array_size(list); i++) {
            snprintf(sub, sizeof sub, "%s.processors[%zu]", path, i);
            if ((st = parse_post_one(t, json_array_get(list, i), name, sub, true))) return st;
        }
        return ATTN_STATUS_OK;
    }
    if (t->n_post_steps >= sizeof t->post_steps / sizeof t->post_steps[0])
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: %s: more than %zu post-processors", name,
                         path, sizeof t->post_steps / sizeof t->post_steps[0]);
    tok_post_step *step = &t->post_steps[t->n_post_steps];
    if (tok_json_str_is(ty, "ByteLevel")) {
        step->kind = TOK_POST_BYTE_LEVEL;
        step->bl = (tok_byte_level){true, true, true};
        static const char *const keys[] = {"add_prefix_space", "trim_offsets", "use_regex"};
        bool *dst[] = {&step->bl.add_prefix_space, &step->bl.trim_offsets, &step->bl.use_regex};
        for (int i = 0; i < 3; i++) {
            json_t *v = json_object_get(obj, keys[i]);
            if (!v) continue;
            if (!json_is_boolean(v))
                return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.%s: expected true or false", name,
                                 path, keys[i]);
            *dst[i] = json_is_true(v);
        }
        t->n_post_steps++;
        if (t->post == TOK_POST_NONE) {
            t->post = TOK_POST_BYTE_LEVEL;
            t->post_bl = step->bl;
        }
        return ATTN_STATUS_OK;
    }
    bool bert = tok_json_str_is(ty, "BertProcessing");
    if (!bert && !tok_json_str_is(ty, "TemplateProcessing")) {
        char tq[64];
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s: type %s is not supported (supported: null, ByteLevel, "
                         "TemplateProcessing, BertProcessing, Sequence)",
                         name, path, tok_quote(tq, sizeof tq, json_string_value(ty),
                                               json_string_length(ty)));
    }
    if (t->post == TOK_POST_TEMPLATE || t->post == TOK_POST_BERT)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s: a second processor that adds special tokens (only one is "
                         "supported)",
                         name, path);
    step->kind = bert ? TOK_POST_BERT : TOK_POST_TEMPLATE;
    t->n_post_steps++;
    if (bert) {
        const char *sep, *cls;
        size_t seplen, clslen;
        int32_t sepid, clsid;
        if ((st = token_id_pair(json_object_get(obj, "sep"), "sep", name, &sep, &seplen, &sepid)) ||
            (st = token_id_pair(json_object_get(obj, "cls"), "cls", name, &cls, &clslen, &clsid)))
            return st;
        t->post = TOK_POST_BERT;
        if ((st = add_special(t, cls, clslen, &clsid, &cls, &clslen, 1, name)) ||
            (st = add_special(t, sep, seplen, &sepid, &sep, &seplen, 1, name)))
            return st;
        /* [CLS]:0 $A:0 [SEP]:0 / [CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1 */
        t->tpl_single = calloc(3, sizeof *t->tpl_single);
        t->tpl_pair = calloc(5, sizeof *t->tpl_pair);
        if (!t->tpl_single || !t->tpl_pair) return oom(name);
        const tok_tpl_piece cl = {true, 0, 0, 0}, a = {false, 0, 0, 0}, s0 = {true, 0, 0, 1},
                            b = {false, 1, 1, 0}, s1 = {true, 0, 1, 1};
        t->tpl_single[0] = cl, t->tpl_single[1] = a, t->tpl_single[2] = s0;
        t->tpl_pair[0] = cl, t->tpl_pair[1] = a, t->tpl_pair[2] = s0, t->tpl_pair[3] = b,
        t->tpl_pair[4] = s1;
        t->n_single = 3;
        t->n_pair = 5;
        t->added_single = 2;
        t->added_pair = 3;
        return ATTN_STATUS_OK;
    }
    t->post = TOK_POST_TEMPLATE;
    json_t *sp = json_object_get(obj, "special_tokens");
    if (!json_is_object(sp))
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: post_processor.special_tokens: expected an object", name);
    void *it = json_object_iter(sp);
    for (; it; it = json_object_iter_next(sp, it)) {
        json_t *val = json_object_iter_value(it);
        char kq[64];
        const char *key = tok_quote(kq, sizeof kq, json_object_iter_key(it),
                                    json_object_iter_key_len(it));
        json_t *ids = json_object_get(val, "ids"), *toks = json_object_get(val, "tokens");
        json_t *id = json_object_get(val, "id");
        size_t n = json_array_size(ids);
        if (!json_is_object(val) || !json_is_string(id) || !json_is_array(ids) ||
            !json_is_array(toks) || json_array_size(toks) != n || n > 1024)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: post_processor.special_tokens[%s]: expected {\"id\": string, "
                             "\"ids\": [int], \"tokens\": [string]} of equal lengths",
                             name, key);
        int32_t idv[1024];
        const char *tv[1024];
        size_t tl[1024];
        for (size_t i = 0; i < n; i++) {
            json_t *a = json_array_get(ids, i), *b = json_array_get(toks, i);
            if (!json_is_integer(a) || json_integer_value(a) < 0 ||
                json_integer_value(a) > TOK_MAX_ID || !json_is_string(b))
                return attn_fail(
                    ATTN_STATUS_FORMAT,
                    "%s: post_processor.special_tokens[%s]: entry %zu: expected an "
                    "id in [0, 2^24) and a string",
                    name, key, i);
            idv[i] = (int32_t)json_integer_value(a);
            tv[i] = json_string_value(b);
            tl[i] = json_string_length(b);
            char field[128];
            snprintf(field, sizeof field, "post_processor.special_tokens[%s].tokens[%zu]", key, i);
            if ((st = tok_no_nul(tv[i], tl[i], name, field))) return st;
        }
        {
            char field[128];
            snprintf(field, sizeof field, "post_processor.special_tokens[%s].id", key);
            if ((st = tok_no_nul(json_string_value(id), json_string_length(id), name, field)))
                return st;
        }
        /* the template refers to it by "id" (tokenizers checks it equals the key) */
        if ((st = add_special(t, json_string_value(id), json_string_length(id), idv, tv, tl, n,
                              name)))
            return st;
    }
    if ((st = parse_template(t, json_object_get(obj, "single"), false, name)) ||
        (st = parse_template(t, json_object_get(obj, "pair"), true, name)))
        return st;
    return ATTN_STATUS_OK;
}

attn_status tok_post_parse(attn_tok *t, json_t *obj, const char *name) {
    t->post = TOK_POST_NONE;
    if (!obj || json_is_null(obj)) return ATTN_STATUS_OK;
    return parse_post_one(t, obj, name, "post_processor", false);
}

static void save_pieces(const attn_tok *t, const tok_tpl_piece *p, size_t n, tok_buf *b) {
    tok_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        tok_buf_puts(b, i ? ", " : "");
        if (p[i].special) {
            tok_buf_puts(b, "{\"SpecialToken\": {\"id\": ");
            const tok_tpl_special *s = &t->tpl_special[p[i].index];
            tok_buf_json_str(b, s->name, s->name_len);
        } else {
            tok_buf_printf(b, "{\"Sequence\": {\"id\": \"%c\"", p[i].seq ? 'B' : 'A');
        }
        tok_buf_printf(b, ", \"type_id\": %u}}", (unsigned)p[i].type_id);
    }
    tok_buf_putc(b, ']');
}

static void save_byte_level_post(const tok_byte_level *bl, tok_buf *b) {
    tok_buf_printf(b,
                   "{\"type\": \"ByteLevel\", \"add_prefix_space\": %s, \"trim_offsets\": %s, "
                   "\"use_regex\": %s}",
                   bl->add_prefix_space ? "true" : "false", bl->trim_offsets ? "true" : "false",
                   bl->use_regex ? "true" : "false");
}

static void save_step(const attn_tok *t, const tok_post_step *st, tok_buf *b) {
    if (st->kind == TOK_POST_BYTE_LEVEL) {
        save_byte_level_post(&st->bl, b);
    } else if (st->kind == TOK_POST_BERT) {
        const tok_tpl_special *c = &t->tpl_special[0], *s = &t->tpl_special[1];
        tok_buf_puts(b, "{\"type\": \"BertProcessing\", \"sep\": [");
        tok_buf_json_str(b, s->tokens[0], s->tok_len[0]);
        tok_buf_printf(b, ", %ld], \"cls\": [", (long)s->ids[0]);
        tok_buf_json_str(b, c->tokens[0], c->tok_len[0]);
        tok_buf_printf(b, ", %ld]}", (long)c->ids[0]);
    } else {
        tok_buf_puts(b, "{\"type\": \"TemplateProcessing\", \"single\": ");
        save_pieces(t, t->tpl_single, t->n_single, b);
        tok_buf_puts(b, ", \"pair\": ");
        save_pieces(t, t->tpl_pair, t->n_pair, b);
        tok_buf_puts(b, ", \"special_tokens\": {");
        for (size_t i = 0; i < t->n_tpl_special; i++) {
            const tok_tpl_special *s = &t->tpl_special[i];
            tok_buf_puts(b, i ? ", " : "");
            tok_buf_json_str(b, s->name, s->name_len);
            tok_buf_puts(b, ": {\"id\": ");
            tok_buf_json_str(b, s->name, s->name_len);
            tok_buf_puts(b, ", \"ids\": [");
            for (size_t k = 0; k < s->n; k++)
                tok_buf_printf(b, "%s%ld", k ? ", " : "", (long)s->ids[k]);
            tok_buf_puts(b, "], \"tokens\": [");
            for (size_t k = 0; k < s->n; k++) {
                tok_buf_puts(b, k ? ", " : "");
                tok_buf_json_str(b, s->tokens[k], s->tok_len[k]);
            }
            tok_buf_puts(b, "]}");
        }
        tok_buf_puts(b, "}}");
    }
}

void tok_post_save(const attn_tok *t, tok_buf *b) {
    tok_buf_puts(b, "  \"post_processor\": ");
    if (t->post_seq) {
        tok_buf_puts(b, "{\"type\": \"Sequence\", \"processors\": [");
        for (size_t i = 0; i < t->n_post_steps; i++) {
            tok_buf_puts(b, i ? ", " : "");
            save_step(t, &t->post_steps[i], b);
        }
        tok_buf_puts(b, "]}");
    } else if (t->post == TOK_POST_BYTE_LEVEL) {
        save_byte_level_post(&t->post_bl, b);
    } else if (t->post != TOK_POST_NONE) {
        tok_post_step st = {t->post, t->post_bl};
        save_step(t, &st, b);
    } else {
        tok_buf_puts(b, "null");
    }
    tok_buf_puts(b, ",\n");
}

void tok_post_free(attn_tok *t) {
    for (size_t i = 0; i < t->n_tpl_special; i++) {
        tok_tpl_special *s = &t->tpl_special[i];
        for (size_t k = 0; s->tokens && k < s->n; k++) free(s->tokens[k]);
        free(s->tokens);
        free(s->tok_len);
        free(s->ids);
        free(s->name);
    }
    free(t->tpl_special);
    free(t->tpl_single);
    free(t->tpl_pair);
    free(t->pad.pad_token);
}

/* ---- encoding ---- */

attn_tok_encode_params attn_tok_encode_default_params(void) {
    attn_tok_encode_params p;
    memset(&p, 0, sizeof p);
    p.add_special_tokens = true;
    p.pad_id = -1;
    return p;
}

attn_tok_encode_params attn_tok_file_params(const attn_tok *t) {
    attn_tok_encode_params p = attn_tok_encode_default_params();
    if (!t) return p;
    if (t->trunc.on) {
        p.truncation = (attn_tok_truncation)t->trunc.strategy;
        p.max_length = t->trunc.max_length;
        p.truncation_side = (attn_tok_side)t->trunc.direction;
    }
    if (t->pad.on) {
        p.padding = t->pad.fixed ? ATTN_TOK_PAD_FIXED : ATTN_TOK_PAD_LONGEST;
        p.pad_length = t->pad.length;
        p.pad_to_multiple_of = t->pad.multiple;
        p.padding_side = (attn_tok_side)t->pad.direction;
        p.pad_id = t->pad.pad_id;
        p.pad_type_id = t->pad.pad_type_id;
    }
    return p;
}

void attn_tok_encoding_free(attn_tok_encoding *e) {
    if (!e) return;
    attn_free(e->ids);
    memset(e, 0, sizeof *e);
}

static attn_status check_params(const attn_tok_encode_params *p) {
    if ((unsigned)p->truncation > ATTN_TOK_TRUNCATE_ONLY_SECOND ||
        (unsigned)p->padding > ATTN_TOK_PAD_FIXED || (unsigned)p->truncation_side > ATTN_TOK_LEFT ||
        (unsigned)p->padding_side > ATTN_TOK_LEFT)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: params: an enum out of range");
    if (p->pad_id < -1 || p->pad_type_id < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encode: params: pad_id must be >= -1 and pad_type_id >= 0");
    if ((p->padding == ATTN_TOK_PAD_FIXED && p->pad_length > (size_t)TOK_MAX_ID) ||
        p->pad_to_multiple_of > (size_t)TOK_MAX_ID)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encode: params: pad_length / pad_to_multiple_of above 2^24");
    return ATTN_STATUS_OK;
}

/* Keep keep ids of v, from the end dropped (RIGHT) or from the start (LEFT). */
static void cut(tok_ivec *v, size_t keep, attn_tok_side side) {
    if (keep >= v->n) return;
    if (side == ATTN_TOK_LEFT) memmove(v->v, v->v + (v->n - keep), keep * sizeof *v->v);
    v->n = keep;
}

static attn_status truncate_ids(tok_ivec *a, tok_ivec *b, bool has_pair, size_t max,
                                const attn_tok_encode_params *p) {
    if (max == 0) {
        a->n = 0;
        b->n = 0;
        return ATTN_STATUS_OK;
    }
    size_t total = a->n + b->n;
    if (total <= max) return ATTN_STATUS_OK;
    size_t to_remove = total - max;
    if (p->truncation == ATTN_TOK_TRUNCATE_LONGEST_FIRST) {
        if (!has_pair) {
            cut(a, max, p->truncation_side);
            return ATTN_STATUS_OK;
        }
        size_t n1 = a->n, n2 = b->n;
        bool swap = n1 > n2;
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        if (n1 > max)
            n2 = n1;
        else
            n2 = n1 > max - n1 ? n1 : max - n1;
        if (n1 + n2 > max) {
            n1 = max / 2;
            n2 = n1 + max % 2;
        }
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        cut(a, n1, p->truncation_side);
        cut(b, n2, p->truncation_side);
        return ATTN_STATUS_OK;
    }
    tok_ivec *target = a;
    if (p->truncation == ATTN_TOK_TRUNCATE_ONLY_SECOND) {
        if (!has_pair)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encode: truncation ONLY_SECOND: no second text was given");
        target = b;
    }
    if (target->n <= to_remove)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encode: truncation to max_length %zu: the %s text has %zu tokens, "
                         "%zu would have to go",
                         p->max_length, target == a ? "first" : "second", target->n, to_remove);
    cut(target, target->n - to_remove, p->truncation_side);
    return ATTN_STATUS_OK;
}

/* An encoding under construction. */
typedef struct {
    tok_ivec ids, types, special;
} enc_tmp;

static void tmp_free(enc_tmp *e) {
    tok_ivec_free(&e->ids);
    tok_ivec_free(&e->types);
    tok_ivec_free(&e->special);
}

static bool tmp_push(enc_tmp *e, int32_t id, int32_t type, int32_t special) {
    return tok_ivec_push(&e->ids, id) && tok_ivec_push(&e->types, type) &&
           tok_ivec_push(&e->special, special);
}

/* Steps 1 and 2 for one text (and pair). */
static attn_status encode_tmp(const attn_tok *t, tok_memo *memo, const char *text, size_t len,
                              const char *pair, size_t pair_len, const attn_tok_encode_params *p,
                              enc_tmp *out) {
    if (!text && len) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: text is NULL");
    if (!pair && pair_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: pair is NULL but pair_len > 0");
    tok_ivec seq[2] = {{0}, {0}};
    bool has_pair = pair != NULL;
    attn_status st = tok_encode_ids(t, memo, text ? text : "", len, &seq[0]);
    if (!st && has_pair) st = tok_encode_ids(t, memo, pair, pair_len, &seq[1]);
    bool tpl = t->post == TOK_POST_TEMPLATE || t->post == TOK_POST_BERT;
    if (!st && p->truncation != ATTN_TOK_TRUNCATE_NONE) {
        size_t added =
            p->add_special_tokens && tpl ? (has_pair ? t->added_pair : t->added_single) : 0;
        /* tokenizers: max_length - added in usize, wrapping when negative: no truncation */
        if (added <= p->max_length)
            st = truncate_ids(&seq[0], &seq[1], has_pair, p->max_length - added, p);
    }
    if (!st) {
        bool ok = true;
        if (tpl) {
            const tok_tpl_piece *pc = has_pair ? t->tpl_pair : t->tpl_single;
            size_t np = has_pair ? t->n_pair : t->n_single;
            for (size_t i = 0; i < np && ok; i++) {
                if (pc[i].special) {
                    if (!p->add_special_tokens) continue;
                    const tok_tpl_special *s = &t->tpl_special[pc[i].index];
                    for (size_t k = 0; k < s->n && ok; k++)
                        ok = tmp_push(out, s->ids[k], (int32_t)pc[i].type_id, 1);
                } else {
                    const tok_ivec *v = &seq[pc[i].seq];
                    for (size_t k = 0; k < v->n && ok; k++)
                        ok = tmp_push(out, v->v[k], (int32_t)pc[i].type_id, 0);
                }
            }
        } else {
            for (int s = 0; s < 2 && ok; s++)
                for (size_t k = 0; k < seq[s].n && ok; k++) ok = tmp_push(out, seq[s].v[k], s, 0);
        }
        if (!ok) st = oom("encode");
    }
    tok_ivec_free(&seq[0]);
    tok_ivec_free(&seq[1]);
    if (st) tmp_free(out);
    return st;
}

static int32_t pad_id_of(const attn_tok *t, const attn_tok_encode_params *p) {
    if (p->pad_id >= 0) return p->pad_id;
    if (t->pad.on) return t->pad.pad_id;
    int32_t id = attn_tok_special_id(t, ATTN_TOK_PAD);
    return id >= 0 ? id : 0;
}

/* Step 3 and the final arrays; target is the length to pad to (0: none). */
static attn_status finish(const attn_tok *t, const enc_tmp *e, size_t target,
                          const attn_tok_encode_params *p, attn_tok_encoding *out) {
    size_t n = e->ids.n, len = n;
    if (p->padding != ATTN_TOK_PAD_NONE) {
        if (p->pad_to_multiple_of > 0 && target % p->pad_to_multiple_of)
            target += p->pad_to_multiple_of - target % p->pad_to_multiple_of;
        if (target > len) len = target;
    }
    int32_t *blk = attn_alloc(4 * (len ? len : 1) * sizeof *blk);
    if (!blk) return oom("encode");
    out->ids = blk;
    out->type_ids = blk + len;
    out->attention_mask = blk + 2 * len;
    out->special_mask = blk + 3 * len;
    out->n = len;
    size_t off = p->padding_side == ATTN_TOK_LEFT ? len - n : 0;
    int32_t pad = len > n ? pad_id_of(t, p) : 0;
    for (size_t i = 0; i < len; i++) {
        bool real = i >= off && i < off + n;
        out->ids[i] = real ? e->ids.v[i - off] : pad;
        out->type_ids[i] = real ? e->types.v[i - off] : p->pad_type_id;
        out->attention_mask[i] = real;
        out->special_mask[i] = real ? e->special.v[i - off] : 1;
    }
    return ATTN_STATUS_OK;
}

attn_status attn_tok_encode_ex(const attn_tok *t, const char *text, size_t len, const char *pair,
                               size_t pair_len, const attn_tok_encode_params *p,
                               attn_tok_encoding *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: out is NULL");
    memset(out, 0, sizeof *out);
    if (!t) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: tokenizer is NULL");
    attn_tok_encode_params def = attn_tok_encode_default_params();
    if (!p) p = &def;
    attn_status st = check_params(p);
    if (st) return st;
    tok_memo *memo = tok_memo_new(t);
    enc_tmp e = {{0}, {0}, {0}};
    st = encode_tmp(t, memo, text, len, pair, pair_len, p, &e);
    tok_memo_free(memo);
    if (st) return st;
    size_t target = p->padding == ATTN_TOK_PAD_FIXED ? p->pad_length : e.ids.n;
    st = finish(t, &e, target, p, out);
    tmp_free(&e);
    return st;
}

attn_status attn_tok_encode_batch(const attn_tok *t, size_t n, const char *const *texts,
                                  const size_t *lens, const char *const *pairs,
                                  const size_t *pair_lens, const attn_tok_encode_params *p,
                                  attn_tok_encoding *out) {
    if (!out && n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: out is NULL");
    if (n) memset(out, 0, n * sizeof *out);
    if (!t) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: tokenizer is NULL");
    if (n && !texts) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: texts is NULL");
    attn_tok_encode_params def = attn_tok_encode_default_params();
    if (!p) p = &def;
    attn_status st = check_params(p);
    if (st) return st;
    enc_tmp *tmp = calloc(n ? n : 1, sizeof *tmp);
    tok_memo *memo = tok_memo_new(t);
    if (!tmp) {
        tok_memo_free(memo);
        return oom("encode");
    }
    size_t longest = 0, i = 0;
    for (; i < n && !st; i++) {
        const char *pr = pairs ? pairs[i] : NULL;
        size_t tl = texts[i] ? (lens ? lens[i] : strlen(texts[i])) : 0;
        size_t pl = pr ? (pair_lens ? pair_lens[i] : strlen(pr)) : 0;
        st = encode_tmp(t, memo, texts[i], tl, pr, pl, p, &tmp[i]);
        if (st) {
            char prev[512];
            snprintf(prev, sizeof prev, "%s", attn_last_error());
            st = attn_fail(st, "%s (text %zu of the batch)", prev, i);
            break;
        }
        if (tmp[i].ids.n > longest) longest = tmp[i].ids.n;
    }
    tok_memo_free(memo);
    size_t target = p->padding == ATTN_TOK_PAD_FIXED ? p->pad_length : longest;
    for (size_t k = 0; k < n && !st; k++) st = finish(t, &tmp[k], target, p, &out[k]);
    for (size_t k = 0; k < n; k++) {
        tmp_free(&tmp[k]);
        if (st) attn_tok_encoding_free(&out[k]);
    }
    free(tmp);
    return st;
}

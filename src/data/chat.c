/* chat.c — chat conversations as supervised fine-tuning examples (include/attn_data.h,
 * attn_data_chat_): rendered by the model's chat template, tokenized, and the assistant's tokens
 * marked as the training targets (see the header for the rule). */
#include "data-impl.h"

#include "attn_chat.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *ids;  /* (n) */
    uint8_t *mask; /* (n) 1: a target (an assistant token) */
    int n;
} chat_example;

struct attn_data_chat {
    chat_example *ex;
    size_t n, cap, skipped;
    int longest;
};

void attn_data_chat_free(attn_data_chat *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) free(d->ex[i].ids), free(d->ex[i].mask);
    free(d->ex);
    free(d);
}

size_t attn_data_chat_count(const attn_data_chat *d) { return d ? d->n : 0; }
size_t attn_data_chat_skipped(const attn_data_chat *d) { return d ? d->skipped : 0; }
int attn_data_chat_longest(const attn_data_chat *d) { return d ? d->longest : 0; }

/* The token ids of conversation c (its first n messages) rendered with or without the generation
 * prompt. */
static attn_status render_ids(const attn_chat_template *t, const attn_tok *tok,
                              const attn_chat_conv *c, size_t n, bool gen, const char *vars,
                              attn_tok_encoding *enc) {
    attn_chat_conv *pre = NULL;
    if (n < attn_chat_conv_len(c)) ATTN_TRY(attn_chat_conv_prefix(c, n, &pre));
    attn_chat_render_params rp = attn_chat_default_render_params();
    rp.add_generation_prompt = gen;
    rp.extra_json = vars;
    char *text = NULL;
    size_t len = 0;
    attn_status s = attn_chat_render(t, pre ? pre : c, &rp, &text, &len);
    attn_chat_conv_free(pre);
    if (s) return s;
    attn_tok_encode_params ep = attn_tok_encode_default_params();
    ep.add_special_tokens = false;
    s = attn_tok_encode_ex(tok, text, len, NULL, 0, &ep, enc);
    free(text);
    return s;
}

static size_t lcp(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t k = 0;
    while (k < na && k < nb && a[k] == b[k]) k++;
    return k;
}

/* One conversation into an example (*kept false: skipped). */
static attn_status make_example(const attn_chat_template *t, const attn_tok *tok,
                                const attn_chat_conv *c, const char *vars, int max_tokens,
                                chat_example *ex, bool *kept) {
    *kept = false;
    memset(ex, 0, sizeof *ex);
    attn_tok_encoding full, p, q;
    memset(&full, 0, sizeof full);
    ATTN_TRY(render_ids(t, tok, c, attn_chat_conv_len(c), false, vars, &full));
    const size_t n = full.n < (size_t)max_tokens ? full.n : (size_t)max_tokens;
    uint8_t *mask = calloc(n ? n : 1, 1);
    attn_status s = mask ? ATTN_STATUS_OK
                         : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "chat data: out of memory");
    size_t targets = 0;
    for (size_t i = 0; !s && i < attn_chat_conv_len(c); i++) {
        if (strcmp(attn_chat_conv_role(c, i), "assistant") != 0) continue;
        memset(&p, 0, sizeof p), memset(&q, 0, sizeof q);
        s = render_ids(t, tok, c, i, true, vars, &p);
        if (!s) s = render_ids(t, tok, c, i + 1, false, vars, &q);
        if (!s) {
            size_t b = lcp(p.ids, p.n, full.ids, full.n), e = lcp(q.ids, q.n, full.ids, full.n);
            for (size_t k = b; k < e && k < n; k++) mask[k] = 1, targets++;
        }
        attn_tok_encoding_free(&p), attn_tok_encoding_free(&q);
    }
    /* the first token is never a target (nothing predicts it) */
    if (!s && n && mask[0]) mask[0] = 0, targets--;
    if (!s && targets > 0) {
        ex->ids = malloc(n * sizeof *ex->ids);
        if (!ex->ids) {
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "chat data: out of memory");
        } else {
            memcpy(ex->ids, full.ids, n * sizeof *ex->ids);
            ex->mask = mask, mask = NULL;
            ex->n = (int)n;
            *kept = true;
        }
    }
    free(mask);
    attn_tok_encoding_free(&full);
    return s;
}

attn_status attn_data_chat_load(const char *path, const attn_chat_template *tpl,
                                const attn_tok *tok, const char *vars_json, int max_tokens,
                                attn_data_chat **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "chat data: NULL out");
    *out = NULL;
    if (!path || !tpl || !tok)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "chat data: NULL argument");
    if (max_tokens < 2)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "chat data: max_tokens %d must be >= 2",
                         max_tokens);
    attn_chat_jsonl *r;
    ATTN_TRY(attn_chat_jsonl_open(path, NULL, &r));
    attn_data_chat *d = calloc(1, sizeof *d);
    attn_status s = d ? ATTN_STATUS_OK : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "chat data: out of memory");
    while (!s) {
        attn_chat_conv *c = NULL;
        s = attn_chat_jsonl_next(r, &c);
        if (s || !c) break;
        if (d->n == d->cap) {
            size_t cap = d->cap ? 2 * d->cap : 64;
            chat_example *e = realloc(d->ex, cap * sizeof *e);
            if (!e) {
                attn_chat_conv_free(c);
                s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "chat data: out of memory");
                break;
            }
            d->ex = e, d->cap = cap;
        }
        bool kept;
        s = make_example(tpl, tok, c, vars_json, max_tokens, &d->ex[d->n], &kept);
        attn_chat_conv_free(c);
        if (s) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            s = attn_fail(s, "%s:%zu: %s", path, attn_chat_jsonl_line(r), msg);
            break;
        }
        if (kept) {
            if (d->ex[d->n].n > d->longest) d->longest = d->ex[d->n].n;
            d->n++;
        } else {
            d->skipped++;
        }
    }
    attn_chat_jsonl_close(r);
    if (!s && d->n == 0)
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                      "%s: no conversation with assistant tokens to learn (%zu skipped)", path,
                      d->skipped);
    if (s) {
        attn_data_chat_free(d);
        return s;
    }
    *out = d;
    return ATTN_STATUS_OK;
}

attn_status attn_data_chat_example(const attn_data_chat *d, size_t i, const int32_t **ids,
                                   const uint8_t **mask, int *n) {
    if (!d || i >= d->n)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "chat data: no example %zu", i);
    if (ids) *ids = d->ex[i].ids;
    if (mask) *mask = d->ex[i].mask;
    if (n) *n = d->ex[i].n;
    return ATTN_STATUS_OK;
}

attn_status attn_data_chat_batch(const attn_data_chat *d, const size_t *idx, int B, int T,
                                 int32_t pad_id, int32_t *x, int32_t *y, size_t *n_targets) {
    if (!d || !idx || !x || !y || B < 1 || T < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "chat data: bad batch arguments");
    size_t targets = 0;
    for (int b = 0; b < B; b++) {
        if (idx[b] >= d->n)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "chat data: no example %zu", idx[b]);
        const chat_example *e = &d->ex[idx[b]];
        int32_t *xb = x + (size_t)b * T, *yb = y + (size_t)b * T;
        for (int t = 0; t < T; t++) {
            xb[t] = t < e->n ? e->ids[t] : pad_id;
            const bool tgt = t + 1 < e->n && e->mask[t + 1];
            yb[t] = tgt ? e->ids[t + 1] : -1;
            targets += tgt;
        }
    }
    if (n_targets) *n_targets = targets;
    return ATTN_STATUS_OK;
}

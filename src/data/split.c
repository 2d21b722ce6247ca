/* split.c — the train/valid/test split by distinct source sentence, and the grouping of a split's
 * pairs into multi-reference BLEU input (include/attn_data.h). Both rest on one step: give every
 * pair the number of its source sentence (exact byte comparison, first appearance order) with an
 * open-addressing hash table. Grouping before shuffling is what keeps a sentence with several
 * translations from leaking across splits. */
#include "data-impl.h"

#include <stdlib.h>
#include <string.h>

attn_data_split_options attn_data_split_default_options(void) {
    attn_data_split_options o = {.seed = 1, .min_valid_pairs = 1000, .min_test_pairs = 1000};
    return o;
}

void attn_data_split_free(attn_data_split *s) {
    if (!s) return;
    free(s->train);
    free(s->valid);
    free(s->test);
    memset(s, 0, sizeof *s);
}

/* FNV-1a, 64-bit: a fixed function so grouping (and hence the split) never depends on the
 * platform. */
static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 0x100000001B3ull;
    return h;
}

/* group[k] = number of the distinct string among strs[idx[k]] (0.. in first-appearance order),
 * first[g] = the k where group g first appears. Returns the number of groups, or (size_t)-1 with
 * the error set. */
static size_t group_strings(const char *const *strs, const size_t *idx, size_t n, size_t *group,
                            size_t *first) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2; /* load factor <= 1/2 keeps probes short */
    size_t *slot = malloc(cap * sizeof *slot); /* group number + 1, 0 = empty */
    if (!slot) {
        attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: out of memory grouping %zu sentences", n);
        return (size_t)-1;
    }
    memset(slot, 0, cap * sizeof *slot);
    size_t ng = 0;
    for (size_t k = 0; k < n; k++) {
        const char *s = strs[idx ? idx[k] : k];
        size_t h = (size_t)fnv1a(s) & (cap - 1);
        for (;;) {
            if (!slot[h]) {
                slot[h] = ng + 1;
                first[ng] = k;
                group[k] = ng++;
                break;
            }
            size_t g = slot[h] - 1;
            const char *t = strs[idx ? idx[first[g]] : first[g]];
            if (!strcmp(s, t)) {
                group[k] = g;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
    }
    free(slot);
    return ng;
}

attn_status attn_data_split_make(const attn_data_corpus *c, const attn_data_split_options *opt,
                                 attn_data_split *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: split: out is NULL");
    memset(out, 0, sizeof *out);
    if (!c || !c->n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: split: empty corpus");
    attn_data_split_options o = opt ? *opt : attn_data_split_default_options();
    size_t n = c->n;
    attn_status st = ATTN_STATUS_OK;
    size_t *group = malloc(n * sizeof *group), *first = malloc(n * sizeof *first);
    size_t *gsize = calloc(n, sizeof *gsize), *order = malloc(n * sizeof *order);
    unsigned char *part = malloc(n); /* per group: 0 train, 1 valid, 2 test */
    if (!group || !first || !gsize || !order || !part) {
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: split: out of memory");
        goto done;
    }
    size_t ng = group_strings(c->src, NULL, n, group, first);
    if (ng == (size_t)-1) {
        st = ATTN_STATUS_OUT_OF_MEMORY;
        goto done;
    }
    for (size_t k = 0; k < n; k++) gsize[group[k]]++;

    /* Sentences in a seeded order; test takes from the front, then valid, until each holds
     * enough pairs; the rest is train. */
    for (size_t g = 0; g < ng; g++) order[g] = g, part[g] = 0;
    attn_data_rng r = attn_data_rng_make(o.seed, 0, 0x5311700ull);
    attn_data_shuffle(&r, order, ng);
    size_t k = 0, got = 0;
    for (; k < ng && got < o.min_test_pairs; k++) part[order[k]] = 2, got += gsize[order[k]];
    out->n_test = got, out->s_test = k;
    size_t k0 = k;
    got = 0;
    for (; k < ng && got < o.min_valid_pairs; k++) part[order[k]] = 1, got += gsize[order[k]];
    out->n_valid = got, out->s_valid = k - k0;
    out->s_train = ng - k;
    out->n_train = n - out->n_test - out->n_valid;
    if (out->n_train == 0) {
        st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                       "data: split: %zu pairs (%zu distinct sources) leave nothing for train "
                       "after at least %zu test and %zu valid pairs",
                       n, ng, o.min_test_pairs, o.min_valid_pairs);
        goto done;
    }
    out->train = malloc(ATTN_MAX(out->n_train, 1) * sizeof(size_t));
    out->valid = malloc(ATTN_MAX(out->n_valid, 1) * sizeof(size_t));
    out->test = malloc(ATTN_MAX(out->n_test, 1) * sizeof(size_t));
    if (!out->train || !out->valid || !out->test) {
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: split: out of memory");
        goto done;
    }
    size_t a = 0, b = 0, t = 0;
    for (size_t i = 0; i < n; i++) { /* file order within each part */
        switch (part[group[i]]) {
        case 0: out->train[a++] = i; break;
        case 1: out->valid[b++] = i; break;
        default: out->test[t++] = i; break;
        }
    }
done:
    free(group);
    free(first);
    free(gsize);
    free(order);
    free(part);
    if (st) attn_data_split_free(out);
    return st;
}

void attn_data_refs_free(attn_data_refs *r) {
    if (!r) return;
    if (r->refs) free((void *)r->refs[0]); /* one block holds every stream */
    free((void *)r->refs);
    free((void *)r->src);
    memset(r, 0, sizeof *r);
}

attn_status attn_data_refs_make(const attn_data_corpus *c, const size_t *idx, size_t n,
                                attn_data_refs *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: refs: out is NULL");
    memset(out, 0, sizeof *out);
    if (!c || (!idx && n)) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: refs: NULL argument");
    for (size_t k = 0; k < n; k++)
        if (idx[k] >= c->n)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "data: refs: index %zu out of range (%zu pairs)", idx[k], c->n);
    attn_status st = ATTN_STATUS_OK;
    size_t m = ATTN_MAX(n, 1);
    size_t *group = malloc(m * sizeof *group), *first = malloc(m * sizeof *first);
    size_t *fill = calloc(m, sizeof *fill);
    const char **all = NULL;
    if (!group || !first || !fill) {
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: refs: out of memory");
        goto done;
    }
    size_t ng = group_strings(c->src, idx, n, group, first);
    if (ng == (size_t)-1) {
        st = ATTN_STATUS_OUT_OF_MEMORY;
        goto done;
    }
    size_t R = 0;
    for (size_t k = 0; k < n; k++) { /* not inside ATTN_MAX: it evaluates its arguments twice */
        size_t f = ++fill[group[k]];
        if (f > R) R = f;
    }
    size_t cells;
    if (!attn_size_mul(R, ng, &cells)) {
        st = attn_fail(ATTN_STATUS_TOO_LARGE, "data: refs: %zu x %zu references", R, ng);
        goto done;
    }
    all = calloc(ATTN_MAX(cells, 1), sizeof *all); /* NULL = no such reference */
    const char **src = malloc(ATTN_MAX(ng, 1) * sizeof *src);
    const char *const **refs = malloc(ATTN_MAX(R, 1) * sizeof *refs);
    if (!all || !src || !refs) {
        free((void *)src);
        free((void *)refs);
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: refs: out of memory");
        goto done;
    }
    memset(fill, 0, m * sizeof *fill);
    for (size_t g = 0; g < ng; g++) src[g] = c->src[idx[first[g]]];
    for (size_t k = 0; k < n; k++) { /* translations in file order fill streams 0, 1, ... */
        size_t g = group[k];
        all[fill[g]++ * ng + g] = c->tgt[idx[k]];
    }
    for (size_t r = 0; r < R; r++) refs[r] = all + r * ng;
    if (R == 0) refs[0] = all; /* so that refs_free finds the block */
    out->n = ng, out->n_refs = R, out->src = src, out->refs = refs;
    all = NULL;
done:
    free(group);
    free(first);
    free(fill);
    free((void *)all);
    return st;
}

attn_status attn_data_refs_write(const attn_data_refs *r, const char *src_path,
                                 const char *ref_prefix) {
    if (!r || !src_path || !ref_prefix)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: refs_write: NULL argument");
    for (size_t i = 0; i < r->n; i++) /* one line per segment, or the streams fall out of step */
        for (size_t k = 0; k <= r->n_refs; k++) {
            const char *s = k == 0 ? r->src[i] : r->refs[k - 1][i];
            if (s && strpbrk(s, "\n\r"))
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "data: refs_write: segment %zu contains a newline", i + 1);
        }
    size_t plen = strlen(ref_prefix);
    char *name = malloc(plen + 32);
    if (!name) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: refs_write: out of memory");
    attn_status st = ATTN_STATUS_OK;
    for (size_t k = 0; k <= r->n_refs && !st; k++) {
        const char *path = src_path;
        if (k > 0) {
            snprintf(name, plen + 32, "%s.%zu", ref_prefix, k - 1);
            path = name;
        }
        attn_data_wfile w;
        st = attn_data_wopen(&w, path);
        if (st) break;
        for (size_t i = 0; i < r->n; i++) {
            const char *s = k == 0 ? r->src[i] : r->refs[k - 1][i];
            /* A missing reference repeats the first: BLEU clips by the maximum count over the
             * references and takes the closest length, so a duplicate changes nothing — the
             * same score as sacreBLEU's None, and the files work with any BLEU tool. */
            if (!s && k > 0) s = r->refs[0][i];
            if (s) attn_data_wputs(&w, s);
            attn_data_wput(&w, "\n", 1);
        }
        st = attn_data_wclose(&w, false);
    }
    free(name);
    return st;
}

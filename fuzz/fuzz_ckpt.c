/* fuzz_ckpt.c — checkpoint loading (attn_ckpt_load: training_state.json schema, file sizes and
 * CRC-32s, model.safetensors names and shapes against the model, optimizer.safetensors against
 * the optimizer). A checkpoint that loads is saved again and must load back identical.
 *
 * Input: FLAGS training_state.json FUZZ_SEP model.safetensors FUZZ_SEP optimizer.safetensors
 * (fewer parts: the files at the end are missing), FLAGS one byte:
 *   bit 0  rewrite "files" in the JSON with the true sizes and CRC-32s (when it parses), so that
 *          mutated tensor files get past the checksums to the parsers behind them
 *   bit 1  put the files in DIR.prev instead of DIR (the crash fallback of the loader)
 *   bit 2  load without an optimizer     bit 3  load without a training state
 * The model is three tensors: "a" (2, 3), "b" (4), "emb.w" (3, 2); the optimizer AdamW over 16. */
#include "fuzz.h"

#include "attn_train.h"

#include <jansson.h>
#include <math.h>

#define NP 16

static attn_optim *opt;
static float params[NP];

static void tensors(attn_ckpt_tensor t[3], float *p) {
    t[0] = (attn_ckpt_tensor){"a", 2, {2, 3}, p};
    t[1] = (attn_ckpt_tensor){"b", 1, {4}, p + 6};
    t[2] = (attn_ckpt_tensor){"emb.w", 2, {3, 2}, p + 10};
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    if (attn_optim_create(&op, NP, NULL, 0, &opt)) abort();
    return 0;
}

static json_t *file_entry(const uint8_t *p, size_t n) {
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", (unsigned)attn_crc32(0, p, n));
    return json_pack("{s:I, s:s}", "bytes", (json_int_t)n, "crc32", hex);
}

/* the JSON with its "files" rewritten, or NULL (caller keeps the original) */
static char *fix_files(const uint8_t *j, size_t jn, const uint8_t *m, size_t mn,
                       const uint8_t *o, size_t on) {
    json_error_t err;
    json_t *root = json_loadb((const char *)j, jn, 0, &err);
    if (!json_is_object(root)) {
        json_decref(root);
        return NULL;
    }
    json_t *files = json_object_get(root, "files");
    if (json_is_object(files)) {
        if (json_object_get(files, "model.safetensors"))
            json_object_set_new(files, "model.safetensors", file_entry(m, mn));
        if (json_object_get(files, "optimizer.safetensors"))
            json_object_set_new(files, "optimizer.safetensors", file_entry(o, on));
    }
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static void roundtrip(const attn_ckpt_state *st, bool with_opt) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/saved", fuzz_scratch());
    attn_ckpt_tensor t[3];
    tensors(t, params);
    if (attn_ckpt_save(dir, t, 3, with_opt ? opt : NULL, st)) {
        fprintf(stderr, "fuzz_ckpt: a loaded checkpoint does not save: %s\n", attn_last_error());
        abort();
    }
    float p2[NP];
    attn_ckpt_tensor t2[3];
    tensors(t2, p2);
    attn_optim *o2;
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    if (attn_optim_create(&op, NP, NULL, 0, &o2)) abort();
    attn_ckpt_state st2 = attn_ckpt_state_init();
    if (attn_ckpt_load(dir, t2, 3, with_opt ? o2 : NULL, &st2)) {
        fprintf(stderr, "fuzz_ckpt: a saved checkpoint does not load: %s\n", attn_last_error());
        abort();
    }
    if (memcmp(p2, params, sizeof p2)) abort();
    if (st2.step != st->step || st2.epoch != st->epoch || st2.data_position != st->data_position ||
        st2.n_rng != st->n_rng)
        abort();
    for (int i = 0; i < st->n_rng; i++)
        if (strcmp(st2.rng[i].name, st->rng[i].name) || st2.rng[i].rng.seed != st->rng[i].rng.seed ||
            st2.rng[i].rng.counter != st->rng[i].rng.counter)
            abort();
    if (with_opt) {
        float *m1, *v1, *m2, *v2;
        attn_optim_state(opt, &m1, &v1);
        attn_optim_state(o2, &m2, &v2);
        if (memcmp(m1, m2, NP * sizeof *m1) || memcmp(v1, v2, NP * sizeof *v1) ||
            attn_optim_step_count(o2) != attn_optim_step_count(opt))
            abort();
    }
    if (st2.extra) json_decref(st2.extra);
    attn_optim_destroy(o2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned flags = data[0];
    const uint8_t *part[3];
    size_t len[3];
    int k = fuzz_split(data + 1, size - 1, 3, part, len);
    char *fixed = flags & 1 ? fix_files(part[0], len[0], part[1], len[1], part[2], len[2]) : NULL;
    fuzz_subdir("ckpt");
    fuzz_subdir("ckpt.prev");
    const char *sub = flags & 2 ? "ckpt.prev" : "ckpt";
    char name[64];
    snprintf(name, sizeof name, "%s/training_state.json", sub);
    if (fixed) fuzz_file(name, fixed, strlen(fixed));
    else fuzz_file(name, part[0], len[0]);
    free(fixed);
    /* an input of fewer parts lacks the files at the end: a missing file's path */
    snprintf(name, sizeof name, "%s/model.safetensors", sub);
    if (k >= 2) fuzz_file(name, part[1], len[1]);
    snprintf(name, sizeof name, "%s/optimizer.safetensors", sub);
    if (k >= 3) fuzz_file(name, part[2], len[2]);
    if (flags & 2) fuzz_rm_rf(fuzz_subdir("ckpt"), false); /* DIR missing: DIR.prev is used */

    char dir[600];
    snprintf(dir, sizeof dir, "%s/ckpt", fuzz_scratch());
    (void)attn_ckpt_exists(dir);
    attn_ckpt_tensor t[3];
    tensors(t, params);
    attn_ckpt_state st = attn_ckpt_state_init();
    bool with_opt = !(flags & 4), with_st = !(flags & 8);
    attn_status s = attn_ckpt_load(dir, t, 3, with_opt ? opt : NULL, with_st ? &st : NULL);
    if (s) {
        fuzz_check_message(attn_last_error());
        return 0;
    }
    if (with_st) {
        if (st.n_rng < 0 || st.n_rng > ATTN_CKPT_MAX_RNG) abort();
        for (int i = 0; i < st.n_rng; i++)
            if (!memchr(st.rng[i].name, 0, sizeof st.rng[i].name)) abort();
        json_t *extra = st.extra;
        st.extra = NULL; /* a round trip of the state proper */
        roundtrip(&st, with_opt);
        if (extra) json_decref(extra);
    }
    return 0;
}

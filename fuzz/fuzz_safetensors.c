/* fuzz_safetensors.c — the safetensors parser (attn_st_open_reader on the input, from memory),
 * then every lookup and typed read of each tensor it accepts. A rejected file must leave a
 * one-line message naming the input; an accepted one must read consistently. */
#include "fuzz.h"

#include "attn_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_reader r;
    if (attn_reader_open_memory(data, size, "fuzz.safetensors", &r)) abort();
    attn_st_file *f;
    if (attn_st_open_reader(r, &f)) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), "fuzz.safetensors")) abort();
        return 0;
    }
    for (int i = 0; i < attn_st_count(f); i++) {
        const attn_st_tensor *t = attn_st_tensor_at(f, i);
        if (!t || attn_st_find(f, t->name) != t) abort();
        /* offsets were validated: the data lies within the input */
        if (t->offset > size || t->nbytes > size - t->offset) abort();
        float *x;
        int32_t *y;
        attn_status s = attn_st_load_f32(f, t->name, &x, NULL);
        if (!s) attn_free(x);
        else fuzz_check_message(attn_last_error());
        s = attn_st_load_i32(f, t->name, &y, NULL);
        if (!s) attn_free(y);
        else fuzz_check_message(attn_last_error());
        /* a shape check against a wrong shape must fail cleanly */
        int64_t shape[ATTN_MAX_DIMS + 1] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        float one;
        if (t->numel <= 1) attn_st_read_f32(f, t->name, t->ndim, t->shape, &one);
        attn_st_read_f32(f, t->name, t->ndim + 1, shape, &one);
    }
    attn_st_find(f, "");
    attn_st_metadata(f, "format");
    attn_st_close(f);
    return 0;
}

/* fuzz_npy.c — the .npy parser (attn_npy_load_f32 on a memory reader): a rejected file must leave
 * a one-line message naming the input; an accepted one must have a consistent shape. */
#include "fuzz.h"

#include "attn_io.h"
#include "../src/io/io-impl.h" /* attn_npy_load_f32_reader */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_reader r;
    if (attn_reader_open_memory(data, size, "fuzz.npy", &r)) abort();
    float *x = NULL;
    int ndim = -1;
    int64_t shape[ATTN_MAX_DIMS];
    if (attn_npy_load_f32_reader(r, &x, &ndim, shape)) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), "fuzz.npy")) abort();
        return 0;
    }
    if (ndim < 0 || ndim > ATTN_MAX_DIMS) abort();
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) abort();
        numel *= (uint64_t)shape[i];
    }
    /* every element came from the input: at least 4 bytes each */
    if (numel > size / 4 + 1) abort();
    volatile float sink = 0;
    for (uint64_t i = 0; i < numel; i++) sink += x[i] * 0.0f;
    (void)sink;
    attn_free(x);
    return 0;
}

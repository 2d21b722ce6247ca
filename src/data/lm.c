/* lm.c — language-model windows for GPT training (include/attn_data.h, attn_data_lm_): nanoGPT's
 * get_batch with a counter-based generator, so that batch `index` is a pure function of
 * (seed, stream, index) and a resumed run needs no generator state. */
#include "data-impl.h"

#include "attn_train.h"

#include <string.h>

/* The ASCII letters as big-endian integers: decorrelate a seed's two streams. */
#define LM_STREAM_TRAIN 0x747261696EULL /* "train" */
#define LM_STREAM_VALID 0x76616C6964ULL /* "valid" */

uint64_t attn_data_lm_key(uint64_t seed, attn_data_lm_stream stream) {
    uint64_t x = seed ^ (stream == ATTN_DATA_LM_VALID ? LM_STREAM_VALID : LM_STREAM_TRAIN);
    return attn_data__mix(x + 0x9E3779B97F4A7C15ull); /* SplitMix64: one step from state x */
}

attn_status attn_data_lm_batch(const int32_t *ids, size_t n, int B, int T, uint64_t seed,
                               attn_data_lm_stream stream, uint64_t index, int32_t *x,
                               int32_t *y) {
    if (!ids || !x || !y)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: lm_batch: NULL argument");
    if (B < 1 || T < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: lm_batch: B %d and T %d must be >= 1", B, T);
    if (n <= (size_t)T)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: lm_batch: %zu tokens hold no window of T + 1 = %d", n, T + 1);
    if (stream != ATTN_DATA_LM_TRAIN && stream != ATTN_DATA_LM_VALID)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: lm_batch: unknown stream %d",
                         (int)stream);
    /* Each batch owns 2^32 words of the stream (B draws take about B of them). */
    if (index >> 32)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: lm_batch: batch index %llu is not below 2^32",
                         (unsigned long long)index);
    attn_rng r;
    attn_rng_set_state(&r, attn_data_lm_key(seed, stream), index << 32);
    for (int b = 0; b < B; b++) {
        size_t o = (size_t)attn_rng_below(&r, (uint64_t)(n - (size_t)T));
        memcpy(x + (size_t)b * (size_t)T, ids + o, (size_t)T * sizeof *x);
        memcpy(y + (size_t)b * (size_t)T, ids + o + 1, (size_t)T * sizeof *y);
    }
    return ATTN_STATUS_OK;
}

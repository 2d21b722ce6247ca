/* train-impl.h — internals shared by src/train/ (optimizer layout for the checkpoint code) and
 * the test hooks tests/test_train.c uses to simulate crashes. Not installed. */
#ifndef ATTN_TRAIN_IMPL_H
#define ATTN_TRAIN_IMPL_H

#include "attn_train.h"
#include "../core/core-impl.h"

/* A contiguous run of elements sharing one weight-decay setting, at most PIECE elements long so
 * that the pieces are also the units of OpenMP work. */
typedef struct {
    size_t i0, i1;
    bool decay;
} attn_optim_piece;

struct attn_optim {
    attn_optim_params p;
    size_t n;
    int64_t step;
    float *m, *v;            /* attn_alloc'd, n floats each (v NULL for SGD, m NULL for SGD
                                without momentum) */
    attn_optim_piece *pieces;
    size_t npieces;
};

/* Test hooks (ckpt.c). attn_ckpt__crash_after = k > 0 makes attn_ckpt_save stop dead after its
 * k-th durable step (file or rename), returning ATTN_STATUS_IO "simulated crash" without any
 * cleanup — the state a power cut there would leave. attn_ckpt__no_exchange = true takes the
 * portable two-rename path instead of renameat2(RENAME_EXCHANGE). */
extern int attn_ckpt__crash_after;
extern bool attn_ckpt__no_exchange;

#endif

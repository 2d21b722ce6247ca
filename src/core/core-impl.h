/* core-impl.h — internal helpers shared by every libattn source file. Not installed. */
#ifndef ATTN_CORE_IMPL_H
#define ATTN_CORE_IMPL_H

#include "attn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Record a failure for attn_last_error() and return s, so callers write
 *   return attn_fail(ATTN_STATUS_FORMAT, "%s: header length %llu exceeds file size", path, n); */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
attn_status attn_fail(attn_status s, const char *fmt, ...);

/* Overflow-checked size arithmetic: return false (and leave *out untouched) on overflow. */
static inline bool attn_size_mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}
static inline bool attn_size_add(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return false;
    *out = a + b;
    return true;
}

/* Product of n dimensions (each must be >= 0) with overflow check. Returns false on overflow or a
 * negative dimension. */
bool attn_size_prod(const int64_t *dims, int n, size_t *out);

/* Larger single buffers are refused as "too large" before allocating: no model or batch attn
 * runs comes near, and an absurd size from a corrupt file must not reach malloc. 256 GiB. */
#define ATTN_MAX_BUFFER_BYTES ((size_t)1 << 38)

/* A set of attn_alloc'ed buffers freed together: the run states of the models (bert.c, gpt.c,
 * encdec.c) allocate every buffer through one, check oom once after a batch of allocations, and
 * free them all with attn_arena_free. */
typedef struct {
    void **ptr; /* (cap) the live buffers, n of them */
    int n, cap;
    bool oom;   /* an allocation failed (set, never cleared, by the arena) */
} attn_arena;

/* nbytes from attn_alloc (attn_arena_calloc: zeroed), kept in the arena; NULL (and a->oom set)
 * when out of memory, or when a->oom is already set. */
void *attn_arena_alloc(attn_arena *a, size_t nbytes);
void *attn_arena_calloc(attn_arena *a, size_t nbytes);
/* Frees p (one of the arena's buffers; NULL is fine) before the rest. */
void attn_arena_release(attn_arena *a, void *p);
/* Frees every buffer and the arena's own table; the arena is empty afterwards. */
void attn_arena_free(attn_arena *a);

/* Ask for transparent huge pages on a large buffer before its first touch (memory.c). */
void attn_advise_huge_pages(void *p, size_t nbytes);

/* Evaluate an attn_status expression and return it from the enclosing function if it failed. */
#define ATTN_TRY(expr)                                                                           \
    do {                                                                                         \
        attn_status attn_try_s_ = (expr);                                                        \
        if (attn_try_s_) return attn_try_s_;                                                     \
    } while (0)

#define ATTN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ATTN_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif

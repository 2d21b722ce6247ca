/* memory.c — aligned allocation and the thread count. */
#include "core-impl.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void *attn_alloc(size_t nbytes) {
    size_t n;
    /* aligned_alloc needs a multiple of the alignment; round up, never to 0. */
    if (!attn_size_add(nbytes, 63, &n)) return NULL;
    n &= ~(size_t)63;
    if (n == 0) n = 64;
    return aligned_alloc(64, n);
}

void *attn_calloc(size_t nbytes) {
    void *p = attn_alloc(nbytes);
    if (p) memset(p, 0, nbytes);
    return p;
}

void attn_free(void *p) { free(p); }

static int g_default_threads = 0;

void attn_set_num_threads(int n) {
#ifdef _OPENMP
    if (g_default_threads == 0) g_default_threads = omp_get_max_threads();
    omp_set_num_threads(n > 0 ? n : g_default_threads);
#else
    (void)n;
#endif
}

int attn_get_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

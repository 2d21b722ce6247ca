/* memory.c — aligned allocation and the thread count. */
#include "core-impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
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

void *attn_arena_alloc(attn_arena *a, size_t nbytes) {
    if (a->oom) return NULL;
    if (a->n == a->cap) {
        const int cap = a->cap ? 2 * a->cap : 64;
        void **p = attn_alloc((size_t)cap * sizeof(void *));
        if (!p) {
            a->oom = true;
            return NULL;
        }
        if (a->ptr) memcpy(p, a->ptr, (size_t)a->n * sizeof(void *));
        attn_free(a->ptr);
        a->ptr = p, a->cap = cap;
    }
    void *p = attn_alloc(nbytes);
    if (!p) {
        a->oom = true;
        return NULL;
    }
    a->ptr[a->n++] = p;
    return p;
}

void *attn_arena_calloc(attn_arena *a, size_t nbytes) {
    void *p = attn_arena_alloc(a, nbytes);
    if (p) memset(p, 0, nbytes);
    return p;
}

void attn_arena_release(attn_arena *a, void *p) {
    if (!p) return;
    for (int i = 0; i < a->n; i++)
        if (a->ptr[i] == p) {
            attn_free(p);
            a->ptr[i] = a->ptr[--a->n];
            return;
        }
}

void attn_arena_free(attn_arena *a) {
    for (int i = 0; i < a->n; i++) attn_free(a->ptr[i]);
    attn_free(a->ptr);
    *a = (attn_arena){0};
}

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

/* Set or clear the flush-to-zero modes on the calling thread; false where there are none. */
static bool set_ftz_this_thread(bool on) {
#if defined(__x86_64__) || defined(__i386__)
    const unsigned bits = 0x8040u; /* FTZ (bit 15) | DAZ (bit 6) */
    unsigned csr = _mm_getcsr();
    _mm_setcsr(on ? (csr | bits) : (csr & ~bits));
    return true;
#elif defined(__aarch64__)
    unsigned long fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    fpcr = on ? (fpcr | (1ul << 24)) : (fpcr & ~(1ul << 24));
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
    return true;
#else
    (void)on;
    return false;
#endif
}

bool attn_set_flush_denormals(bool on) {
    if (!set_ftz_this_thread(on)) return false;
#ifdef _OPENMP
#pragma omp parallel
    { (void)set_ftz_this_thread(on); }
#endif
    return true;
}

/* Transparent huge pages on a large buffer before it is first touched (where the kernel leaves
 * them to madvise): generation streams every weight once per token, and with 4 KB pages the TLB
 * misses cost ~10% of that stream (measured on the GPT-2-124M shapes). */
void attn_advise_huge_pages(void *p, size_t nbytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t a0 = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t a1 = ((uintptr_t)p + nbytes) & ~(huge - 1);
    if (a1 > a0) (void)madvise((void *)a0, a1 - a0, MADV_HUGEPAGE);
#else
    (void)p, (void)nbytes;
#endif
}

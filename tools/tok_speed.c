/* tok_speed.c — attn's tokenizer speed on one text: load time, encode of the whole text as one
 * call and line by line, decode; best of three each (TOK_SPEED_REPS=N: of N). Built and run by
 * tools/tok_speed.sh.
 *   tok_speed TEXT_FILE TOKENIZER_JSON...
 * prints one line per tokenizer: name, load s, ids, encode s and MB/s, per-line encode s, decode s
 * (or the error when attn refuses the file). */
#include "attn_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* The two measured calls, kept out of line so that callgrind can count them alone
 * (tools/tok_speed.sh with TOK_SPEED_CALLGRIND=1). */
__attribute__((noinline)) int encode_whole(const attn_tok *t, const char *text, size_t n,
                                           int32_t **ids, size_t *k) {
    return attn_tok_encode_alloc(t, text, n, ids, k) != ATTN_STATUS_OK;
}

__attribute__((noinline)) int encode_lines(const attn_tok *t, const char *text, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        if (e < n) e++;
        int32_t *li;
        size_t lk;
        if (attn_tok_encode_alloc(t, text + i, e - i, &li, &lk)) return 1;
        attn_free(li);
        i = e;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tok_speed TEXT_FILE TOKENIZER_JSON...\n");
        return 2;
    }
    size_t n;
    char *text = slurp(argv[1], &n);
    if (!text) {
        fprintf(stderr, "tok_speed: cannot read %s\n", argv[1]);
        return 1;
    }
    printf("%-40s %7s %9s %9s %8s %9s %9s\n", "tokenizer", "load s", "ids", "encode s", "MB/s",
           "lines s", "decode s");
    for (int a = 2; a < argc; a++) {
        double best[4] = {1e9, 1e9, 1e9, 1e9};
        size_t k = 0;
        attn_tok *t = NULL;
        int failed = 0;
        const char *r = getenv("TOK_SPEED_REPS");
        int reps = r && atoi(r) > 0 ? atoi(r) : 3;
        for (int rep = 0; rep < reps && !failed; rep++) {
            double t0 = now();
            if (attn_tok_load(argv[a], &t)) {
                printf("%-40s %s\n", argv[a], attn_last_error());
                failed = 1;
                break;
            }
            double t1 = now();
            int32_t *ids = NULL;
            if (encode_whole(t, text, n, &ids, &k)) {
                printf("%-40s encode: %s\n", argv[a], attn_last_error());
                failed = 1;
            }
            double t2 = now();
            if (!failed && encode_lines(t, text, n)) failed = 1; /* as a data loader would */
            double t3 = now();
            char *d = NULL;
            size_t dl;
            if (!failed && attn_tok_decode_alloc(t, ids, k, 0, &d, &dl)) failed = 1;
            double t4 = now();
            double v[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
            for (int j = 0; j < 4; j++)
                if (v[j] < best[j]) best[j] = v[j];
            attn_free(ids);
            attn_free(d);
            attn_tok_free(t);
        }
        if (!failed)
            printf("%-40s %7.3f %9zu %9.3f %8.2f %9.3f %9.3f\n", argv[a], best[0], k, best[1],
                   (double)n / 1e6 / best[1], best[2], best[3]);
    }
    free(text);
    return 0;
}

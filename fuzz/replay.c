/* replay.c — a main() for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput on each
 * file named on the command line and on every file in each directory named (sorted by name, not
 * recursive). A missing path is skipped (a target may have no regressions yet; noted when
 * ATTN_REPLAY_VERBOSE is set, which also names each input before it runs).
 * Prints "replay NAME: N inputs" (on stderr) and exits 0 when every input ran; a crash aborts
 * (under ASan with a report), as in libFuzzer.
 *
 *   build/fuzz/replay-safetensors fuzz/corpus/safetensors fuzz/regress/safetensors */
#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b, cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return -1;
    }
    /* an exact-size copy, so that ASan sees reads past the input's end */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    if (getenv("ATTN_REPLAY_VERBOSE")) fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int main(int argc, char **argv) {
    const char *name = strrchr(argv[0], '/');
    name = name ? name + 1 : argv[0];
    if (!strncmp(name, "replay-", 7)) name += 7;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    long count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            if (getenv("ATTN_REPLAY_VERBOSE"))
                fprintf(stderr, "replay %s: %s: not there, skipped\n", name, argv[i]);
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i])) rc = 1;
            else count++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "replay %s: cannot list %s: %s\n", name, argv[i], strerror(errno));
            rc = 1;
            continue;
        }
        size_t n = 0, cap = 64;
        char **names = malloc(cap * sizeof *names);
        struct dirent *e;
        while (names && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue; /* ., .., hidden files (.gitkeep) */
            if (n == cap) {
                char **nn = realloc(names, 2 * cap * sizeof *names);
                if (!nn) break;
                names = nn, cap *= 2;
            }
            size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[n] = malloc(l);
            if (!names[n]) break;
            snprintf(names[n], l, "%s/%s", argv[i], e->d_name);
            n++;
        }
        closedir(d);
        if (!names) return 1;
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t k = 0; k < n; k++) {
            struct stat fs;
            if (stat(names[k], &fs) == 0 && S_ISREG(fs.st_mode)) {
                if (run_file(names[k])) rc = 1;
                else count++;
            }
            free(names[k]);
        }
        free(names);
    }
    fprintf(stderr, "replay %s: %ld inputs\n", name, count); /* stdout may be silenced */
    return rc;
}

/* fuzz.h — shared pieces of the fuzz targets in fuzz/fuzz_<name>.c.
 *
 * Every target defines the libFuzzer entry point
 *     int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
 * and optionally
 *     int LLVMFuzzerInitialize(int *argc, char ***argv);
 * and is linked two ways (mk/fuzz.mk):
 *   - with clang -fsanitize=fuzzer,address,undefined into build-fuzz/fuzz/fuzz_<name> (`make fuzz`);
 *   - with fuzz/replay.c, a plain main() that feeds files and directories to the same entry point,
 *     into $(BUILD)/fuzz/replay-<name> with the build's own flags, so `make test` / `make san`
 *     replay the seed corpus and every crash input ever found (fuzz/regress/<name>/), see
 *     tests/test_fuzz_regress.c.
 *
 * A target must not print, must not leave files behind and must be deterministic. A target whose
 * code under test needs files (a directory loader) writes the input into fuzz_scratch(), a private
 * directory removed at exit.
 *
 * Inputs made of several files are split at FUZZ_SEP (the dictionaries contain it, so the
 * mutator inserts and removes part boundaries easily). Adding a target for a new loader (GPT,
 * BERT, ...) is one file fuzz/fuzz_<name>.c with a few seed files in fuzz/corpus/<name>/;
 * mk/fuzz.mk and tests/test_fuzz_regress.c find it by its name. */
#ifndef ATTN_FUZZ_H
#define ATTN_FUZZ_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_SEP "\n@@ATTN-PART@@\n"
#define FUZZ_SEP_LEN (sizeof FUZZ_SEP - 1)

/* Split data at FUZZ_SEP into at most max parts (the last part takes the rest). Returns the number
 * of parts (>= 1); parts past it are set to empty. */
static inline int fuzz_split(const uint8_t *data, size_t size, int max, const uint8_t **part,
                             size_t *len) {
    int k = 0;
    const uint8_t *p = data, *end = data + size;
    while (k < max - 1) {
        const uint8_t *q = NULL;
        for (const uint8_t *s = p; (size_t)(end - s) >= FUZZ_SEP_LEN; s++)
            if (*s == FUZZ_SEP[0] && !memcmp(s, FUZZ_SEP, FUZZ_SEP_LEN)) {
                q = s;
                break;
            }
        if (!q) break;
        part[k] = p, len[k] = (size_t)(q - p), k++;
        p = q + FUZZ_SEP_LEN;
    }
    part[k] = p, len[k] = (size_t)(end - p), k++;
    for (int i = k; i < max; i++) part[i] = end, len[i] = 0;
    return k;
}

static char fuzz_scratch_dir[256];

static inline void fuzz_rm_rf(const char *path, bool keep_top) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[4096];
                if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < sizeof sub)
                    fuzz_rm_rf(sub, false);
            }
            closedir(d);
        }
        if (!keep_top) rmdir(path);
    } else {
        unlink(path);
    }
}

static inline void fuzz_scratch_cleanup(void) {
    if (fuzz_scratch_dir[0]) fuzz_rm_rf(fuzz_scratch_dir, false);
}

/* A private scratch directory (in /dev/shm when possible: fast, no disk wear), removed at exit. */
static inline const char *fuzz_scratch(void) {
    if (fuzz_scratch_dir[0]) return fuzz_scratch_dir;
    const char *bases[3] = {getenv("ATTN_FUZZ_TMP"), "/dev/shm", getenv("TMPDIR")};
    for (int i = 0; i < 4 && !fuzz_scratch_dir[0]; i++) {
        const char *b = i < 3 ? bases[i] : "/tmp";
        if (!b || !*b) continue;
        snprintf(fuzz_scratch_dir, sizeof fuzz_scratch_dir, "%s/attn-fuzz-XXXXXX", b);
        if (!mkdtemp(fuzz_scratch_dir)) fuzz_scratch_dir[0] = '\0';
    }
    if (!fuzz_scratch_dir[0]) {
        perror("fuzz: cannot create a scratch directory");
        abort();
    }
    atexit(fuzz_scratch_cleanup);
    return fuzz_scratch_dir;
}

/* path = scratch/name; written with exactly n bytes. Aborts on failure (an environment problem,
 * not a finding). */
static inline const char *fuzz_file(const char *name, const void *data, size_t n) {
    static char bufs[4][512];
    static int k;
    char *path = bufs[k++ & 3];
    snprintf(path, sizeof bufs[0], "%s/%s", fuzz_scratch(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const char *p = data;
    size_t left = n;
    while (fd >= 0 && left) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) break;
        p += w, left -= (size_t)w;
    }
    if (fd < 0 || left) {
        perror("fuzz: cannot write a scratch file");
        abort();
    }
    close(fd);
    return path;
}

/* A sub-directory of the scratch directory, created empty. */
static inline const char *fuzz_subdir(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_scratch(), name);
    fuzz_rm_rf(path, false);
    if (mkdir(path, 0755) != 0) {
        perror("fuzz: cannot create a scratch directory");
        abort();
    }
    return path;
}

/* A library failure must leave a one-line message; anything else is a finding. */
static inline void fuzz_check_message(const char *msg) {
    if (!msg || !*msg || strchr(msg, '\n')) {
        fprintf(stderr, "fuzz: bad error message: \"%s\"\n", msg ? msg : "(null)");
        abort();
    }
}

#endif

/* test_fuzz_regress.c — every fuzz target (fuzz/fuzz_<name>.c) replays its seed corpus
 * fuzz/corpus/<name>/ and every crash input ever found, fuzz/regress/<name>/, through the
 * replay program $ATTN_BUILD/fuzz/replay-<name> (fuzz/replay.c, built with this build's flags by
 * mk/fuzz.mk): under `make san` that is ASan + UBSan + LeakSanitizer on each input. A target must
 * exit 0 and report how many inputs it ran; a missing replay program is a failure (the build did
 * not include mk/fuzz.mk). */
#include "tu.h"

#include <stdbool.h>
#include <sys/wait.h>

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void test_replay_all(void **state) {
    (void)state;
    const char *build = getenv("ATTN_BUILD");
    if (!build || !*build) build = "build";
    DIR *d = opendir("fuzz");
    assert_non_null(d);
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "fuzz_", 5) || l < 8 || strcmp(e->d_name + l - 2, ".c")) continue;
        names[n] = malloc(l);
        assert_non_null(names[n]);
        snprintf(names[n], l - 6, "%s", e->d_name + 5); /* fuzz_NAME.c -> NAME */
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    assert_true(n >= 8);
    int failed = 0;
    long total = 0;
    for (int i = 0; i < n; i++) {
        char bin[1024], cmd[4096], corpus[600], regress[600];
        snprintf(bin, sizeof bin, "%s/fuzz/replay-%s", build, names[i]);
        snprintf(corpus, sizeof corpus, "fuzz/corpus/%s", names[i]);
        snprintf(regress, sizeof regress, "fuzz/regress/%s", names[i]);
        if (access(bin, X_OK) != 0) {
            printf("  %-12s MISSING %s (is mk/fuzz.mk included by the Makefile?)\n", names[i], bin);
            failed++;
            continue;
        }
        size_t nc = count_files(corpus), nr = count_files(regress);
        if (nc == 0) {
            printf("  %-12s has no seed corpus in %s\n", names[i], corpus);
            failed++;
        }
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' 2>&1", bin, corpus, regress);
        double t0 = tu_now();
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char out[1 << 14];
        size_t got = fread(out, 1, sizeof out - 1, p);
        out[got] = '\0';
        int st = pclose(p);
        long ran = -1;
        const char *r = strstr(out, "inputs");
        if (r) {
            const char *c = r;
            while (c > out && c[-1] == ' ') c--;
            while (c > out && c[-1] >= '0' && c[-1] <= '9') c--;
            ran = strtol(c, NULL, 10);
        }
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && ran == (long)(nc + nr);
        printf("  %-12s %3zu seeds + %3zu regressions replayed in %.2f s: %s\n", names[i], nc, nr,
               tu_now() - t0, ok ? "ok" : "FAIL");
        if (!ok) {
            printf("%s\n", out);
            failed++;
        } else {
            total += ran;
        }
    }
    printf("  %d targets, %ld inputs\n", n, total);
    for (int i = 0; i < n; i++) free(names[i]);
    if (failed) fail_msg("%d fuzz target(s) failed their replay", failed);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tu.h — shared helpers for the cmocka test programs: tolerance checks that report the measured
 * error, a seeded random generator, and the location of the PyTorch reference files that
 * tests/run.sh generates live (ATTN_REF_DIR).
 *
 * Two rules make a test unable to pass by accident (both built into this header):
 *   - A failed check fails the cmocka test it ran in, by itself: every cmocka_unit_test(f) runs
 *     f through tu_run_test (below), which fails the test when any closeness check in it failed
 *     (tu_failures != 0). Nothing depends on remembering TU_END().
 *   - A test that cannot run says why and is reported as skipped, never as passed: it calls
 *     tu_skip("reason") when a program, file or package it needs is missing (a software skip)
 *     or tu_skip_hw("reason") when this CPU lacks a feature (AVX-512, AVX512-BF16). Each prints
 *     one line "tu-skip: TEST: REASON" / "tu-skip-hw: TEST: REASON" and calls cmocka's skip().
 *     tu_skip_env("reason") is for the way the test is run, which no installation changes: under
 *     valgrind (a test deliberately not run under memcheck), as root (permissions not enforced).
 *     Where only part of a test cannot run (one backend, one optional tool), that part is its own
 *     cmocka test, skipped on its own.
 * tests/run.sh counts the skips and lists each with its reason; under CI (CI set, as .ci/run
 * does) where everything is installed, a software skip fails the run; hardware skips (the CI
 * machine may lack AVX-512) and environment skips are listed and allowed. */
#ifndef ATTN_TU_H
#define ATTN_TU_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "attn_core.h"
#include "attn_kernels.h" /* attn_backend_available, attn_precision_available: tu_need_* */

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* RUNNING_ON_VALGRIND, for tu_valgrind() */
#endif
#endif

/* Number of failed closeness checks in the running test (tu_close counts into it, and so may a
 * test's own checks); tu_run_test zeroes it before each test and fails the test if it is not 0
 * after. */
static int tu_failures;

/* ---- every test runs through tu_run_test -------------------------------------------------------
 * cmocka_unit_test(f) is redefined so that the test is { "f", tu_run_test, with f in its initial
 * state }: tu_run_test zeroes tu_failures, runs f and then fails the test with the count when a
 * check failed. This, rather than failing inside tu_close at once, keeps a failing test printing
 * every comparison it makes (all backends, all shapes: what one needs to see what broke), and
 * covers the tests' hand-made checks that count into tu_failures; and rather than a cmocka
 * teardown, because cmocka reports a failing teardown as an ERROR that its "[  FAILED  ] N
 * test(s)" count and list leave out, whereas a failure here is an ordinary [  FAILED  ] f.
 * The one constraint: a group setup must not set *state (cmocka would hand that state to every
 * test in place of f's; none does, and tu_run_test fails the test loudly if one did). Tests do not
 * read their state argument. */
typedef struct {
    unsigned magic; /* TU_UNIT_MAGIC: the state really is this struct */
    CMUnitTestFunction fn;
    const char *name;
} tu_unit;
#define TU_UNIT_MAGIC 0x7475u

/* The running test's name, for the skip lines ("?" outside a test). */
static const char *tu_test_name __attribute__((unused)) = "?";

static inline void tu_run_test(void **state) {
    const tu_unit *u = *state;
    if (!u || u->magic != TU_UNIT_MAGIC)
        fail_msg("tu.h: the test's state is not its tu_unit (did a group setup set *state?)");
    tu_failures = 0;
    tu_test_name = u->name;
    u->fn(state);
    fflush(stdout); /* the test's lines before cmocka's verdict (stderr) */
    if (tu_failures) {
        const int n = tu_failures;
        tu_failures = 0;
        fail_msg("%s: %d check(s) failed (see the lines above)", u->name, n);
    }
}

#undef cmocka_unit_test
#define cmocka_unit_test(f) {#f, tu_run_test, NULL, NULL, &(tu_unit){TU_UNIT_MAGIC, f, #f}}

/* ---- skipping a test -------------------------------------------------------------------------
 * One line "KIND: TEST: REASON" on stdout (tests/run.sh and .ci/valgrind.sh parse it), then
 * cmocka's skip(). A test whose checks already failed fails instead of being skipped. KIND:
 *   tu-skip           a program, file or package the test needs is missing: an installation
 *                     problem, so it fails a CI run;
 *   tu-skip-hw        this CPU lacks a feature (AVX-512, AVX512-BF16): allowed everywhere;
 *   tu-skip-env       how the test is run makes the check meaningless (under valgrind, as root):
 *                     allowed everywhere.
 * A bare skip() is a software skip with no reason; use the helpers. */
static inline void tu_skip_line(const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void tu_skip_line(const char *kind, const char *fmt, ...) {
    if (tu_failures) {
        const int n = tu_failures;
        tu_failures = 0;
        fail_msg("%s: %d check(s) failed before the skip", tu_test_name, n);
    }
    char reason[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    for (char *c = reason; *c; c++)
        if (*c == '\n') *c = ' '; /* one line */
    printf("%s: %s: %s\n", kind, tu_test_name, reason);
    fflush(stdout);
}
#undef skip
#define skip() tu_skip("skip() without a reason at %s:%d", __FILE__, __LINE__)
#define tu_skip(...)                                                                             \
    do {                                                                                         \
        tu_skip_line("tu-skip", __VA_ARGS__);                                                    \
        _skip(__FILE__, __LINE__);                                                               \
    } while (0)
#define tu_skip_hw(...)                                                                          \
    do {                                                                                         \
        tu_skip_line("tu-skip-hw", __VA_ARGS__);                                                 \
        _skip(__FILE__, __LINE__);                                                               \
    } while (0)
#define tu_skip_env(...)                                                                         \
    do {                                                                                         \
        tu_skip_line("tu-skip-env", __VA_ARGS__);                                                \
        _skip(__FILE__, __LINE__);                                                               \
    } while (0)
/* Skip the test (a hardware skip) unless this CPU can run backend be. */
#define tu_need_backend(be)                                                                      \
    do {                                                                                         \
        if (!attn_backend_available(be))                                                         \
            tu_skip_hw("backend %s not available on this CPU", attn_backend_name(be));           \
    } while (0)
/* Skip the test (a hardware skip) unless bfloat16 GEMMs run under the current backend: the avx512
 * backend on a CPU with AVX512-BF16 (or the ref backend). */
#define tu_need_bf16()                                                                           \
    do {                                                                                         \
        if (!attn_precision_available(ATTN_PRECISION_BF16))                                      \
            tu_skip_hw("precision bf16 not available with backend %s (needs the avx512 backend "  \
                       "on a CPU with AVX512-BF16)",                                             \
                       attn_backend_name(attn_get_backend()));                                   \
    } while (0)

/* got ≈ ref when max|got − ref| <= rtol · max|ref| + atol. Prints one line with the numbers
 * (quiet when ATTN_TEST_QUIET is set and the check passes). Returns 1 if close. */
static inline int tu_close(const char *what, const float *got, const float *ref, size_t n,
                           double rtol, double atol) {
    double err = 0, scale = 0;
    size_t worst = 0;
    int nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        double r = ref[i], g = got[i];
        if (!isfinite(g) && isfinite(r)) nonfinite = 1;
        double e = fabs(g - r);
        if (e > err || (e != e)) {
            err = e;
            worst = i;
        }
        if (fabs(r) > scale) scale = fabs(r);
    }
    int ok = !nonfinite && err <= rtol * scale + atol;
    if (!ok || !getenv("ATTN_TEST_QUIET"))
        printf("  %-44s max_abs_err=%.3e max|ref|=%.3e rel=%.2e %s\n", what, err, scale,
               scale > 0 ? err / scale : err, ok ? "ok" : "FAIL");
    if (!ok) {
        printf("    worst at %zu: got %.9g, expected %.9g (tolerance %.1e * max|ref| + %.1e)\n",
               worst, (double)got[worst], (double)ref[worst], rtol, atol);
        tu_failures++;
    }
    return ok;
}

/* Not needed any more (tu_run_test does both); kept for the files that still use them. TU_BEGIN
 * does nothing: zeroing tu_failures in the middle of a test would forget failed checks. TU_END
 * is a checkpoint: fail the test now if a check so far failed (before work that depends on it). */
#define TU_BEGIN() ((void)0)
#define TU_END()                                                                                 \
    do {                                                                                         \
        if (tu_failures) {                                                                       \
            const int tu_n_ = tu_failures;                                                       \
            tu_failures = 0;                                                                     \
            fail_msg("%d closeness check(s) failed", tu_n_);                                     \
        }                                                                                        \
    } while (0)

/* Deterministic uniform floats in [lo, hi). */
typedef struct {
    uint64_t s;
} tu_rng;
static inline float tu_uniform(tu_rng *r, float lo, float hi) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return lo + (hi - lo) * (float)((r->s >> 40) * (1.0 / 16777216.0));
}
static inline void tu_fill(tu_rng *r, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = tu_uniform(r, lo, hi);
}

/* Path of a reference file generated by tools/ref_*.py: $ATTN_REF_DIR/name (default build/ref). */
static inline const char *tu_ref_path(const char *name) {
    static char buf[4096];
    const char *dir = getenv("ATTN_REF_DIR");
    snprintf(buf, sizeof buf, "%s/%s", dir && *dir ? dir : "build/ref", name);
    return buf;
}

/* Whether the test runs under valgrind (.ci/valgrind.sh sets ATTN_TEST_VALGRIND=1; a run under
 * valgrind by hand is detected too): the heavy tests then run their cases at smaller sizes or
 * fewer repetitions, still through every code path and error path. Full sizes stay in
 * `make test` and `make san`. */
static inline int tu_valgrind(void) {
    const char *e = getenv("ATTN_TEST_VALGRIND");
    if (e && *e) return strcmp(e, "0") != 0;
#ifdef RUNNING_ON_VALGRIND
    return RUNNING_ON_VALGRIND ? 1 : 0;
#else
    return 0;
#endif
}

/* Whether the test was built with AddressSanitizer (make san): tests whose cases repeat one code
 * path with other data (and spend their time in unsanitized Python checks) may run a subset, as
 * under valgrind; the full set runs in make test. */
static inline int tu_sanitized(void) {
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 1;
#else
    return 0;
#endif
#else
    return 0;
#endif
}

/* Whether ATTN_TEST_QUIET is set (print only failures). */
static inline int tu_quiet(void) { return getenv("ATTN_TEST_QUIET") != NULL; }

/* Monotonic seconds, for the timings tests print (never assert on them). */
static inline double tu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The whole file, NUL-terminated (malloc'd; *n bytes without the NUL), or NULL if it cannot be
 * opened. */
static inline char *tu_read_all(const char *path, size_t *n) {
    *n = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)sz, fp), (size_t)sz);
    fclose(fp);
    b[sz] = '\0';
    *n = (size_t)sz;
    return b;
}

static inline void tu_write_all(const char *path, const char *s, size_t n) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(s, 1, n, fp), n);
    fclose(fp);
}

/* The test program's scratch directory (made by tu_mkdtemp in main). */
static char tu_dir[512] __attribute__((unused));

/* Path of a scratch file in tu_dir (4 rotating buffers: copy a path that must outlive 3 more
 * calls). */
static inline const char *tu_tmp(const char *name) {
    static char bufs[4][1024];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, sizeof bufs[0], "%s/%s", tu_dir, name);
    return b;
}

/* The status must be `want` and the one-line message must contain each non-NULL substring. */
static inline void tu_expect_fail3(attn_status got, attn_status want, const char *s1,
                                   const char *s2, const char *s3) {
    const char *msg = attn_last_error();
    if (!tu_quiet()) printf("  [%s] %s\n", attn_status_str(got), msg);
    if (got != want)
        fail_msg("status %s, expected %s (message: %s)", attn_status_str(got),
                 attn_status_str(want), msg);
    const char *subs[3] = {s1, s2, s3};
    for (int i = 0; i < 3; i++)
        if (subs[i] && !strstr(msg, subs[i])) fail_msg("message \"%s\" lacks \"%s\"", msg, subs[i]);
    if (strchr(msg, '\n')) fail_msg("message has a newline");
}
#define tu_expect_fail(got, want, s1, s2) tu_expect_fail3(got, want, s1, s2, NULL)

/* Scratch space: make $TMPDIR/attn-test-NAME-XXXXXX (default /tmp) into buf; 0 on success. */
static inline int tu_mkdtemp(char *buf, size_t cap, const char *name) {
    const char *base = getenv("TMPDIR");
    snprintf(buf, cap, "%s/attn-test-%s-XXXXXX", base && *base ? base : "/tmp", name);
    if (mkdtemp(buf)) return 0;
    perror("mkdtemp");
    return -1;
}

/* Remove a scratch directory tree (does not follow symbolic links). */
static inline void tu_rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(n);
        if (!p) break;
        memcpy(p, dir, strlen(dir));
        p[strlen(dir)] = '/';
        memcpy(p + strlen(dir) + 1, e->d_name, strlen(e->d_name) + 1);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            tu_rm_tree(p);
        else
            unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Paths dir/name in 4 rotating buffers: each helper that hands out paths (ref(), work(), ...)
 * keeps its own ring, and a path must be copied if it has to outlive 3 more calls on it. */
typedef struct {
    char b[4][4400];
    int k;
} tu_path_ring;
static inline const char *tu_path(tu_path_ring *r, const char *dir, const char *name) {
    char *b = r->b[r->k++ & 3];
    snprintf(b, sizeof r->b[0], "%s/%s", dir, name);
    return b;
}

/* ---- running the CLI ---------------------------------------------------------------------------
 * The end-to-end tests run $ATTN_BUILD/attn (so under `make san` the sanitizer build). */

/* $ATTN_BUILD/attn, default build/attn. */
static inline const char *tu_attn_bin(void) {
    static char b[4096];
    const char *d = getenv("ATTN_BUILD");
    snprintf(b, sizeof b, "%s/attn", d && *d ? d : "build");
    return b;
}

/* s as one single-quoted shell word, into buf (cap bytes; a longer s is cut). */
static inline const char *tu_shq(const char *s, char *buf, size_t cap) {
    size_t k = 0;
    buf[k++] = '\'';
    for (; *s && k + 6 < cap; s++) {
        if (*s == '\'') {
            memcpy(buf + k, "'\\''", 4);
            k += 4;
        } else {
            buf[k++] = *s;
        }
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

/* Run the shell command line cmd, its stdout (and its stderr too when with_stderr, else it is
 * dropped) captured into out[0..cap) NUL-terminated; returns the exit status (-1: killed). */
static inline int tu_sh_capture(const char *cmd, int with_stderr, char *out, size_t cap) {
    size_t len = strlen(cmd) + 32;
    char *full = malloc(len);
    assert_non_null(full);
    snprintf(full, len, "%s %s", cmd, with_stderr ? "2>&1" : "2>/dev/null");
    FILE *p = popen(full, "r");
    free(full);
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run the shell command line cmd with its stdout and stderr printed, each line after `prefix`;
 * returns the command's exit status (-1: killed). Unlike `cmd | sed 's/^/  /'` in system(), whose
 * status is sed's, a failing command is seen. */
static inline int tu_sh_indented(const char *cmd, const char *prefix) {
    size_t len = strlen(cmd) + 16;
    char *full = malloc(len);
    assert_non_null(full);
    snprintf(full, len, "%s 2>&1", cmd);
    fflush(stdout);
    FILE *p = popen(full, "r");
    free(full);
    assert_non_null(p);
    char line[4096];
    while (fgets(line, sizeof line, p)) printf("%s%s", prefix, line);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run `attn --threads 1 ARGS` (ARGS already quoted) with stdin from in (NULL: /dev/null), stdout
 * into the file out and stderr into the file err; returns the exit status (-1: killed). */
static inline int tu_run_cli_files(const char *args, const char *in, const char *out,
                                   const char *err) {
    size_t len = strlen(args) + strlen(out) + strlen(err) + (in ? strlen(in) : 10) + 4200;
    char *cmd = malloc(len);
    assert_non_null(cmd);
    snprintf(cmd, len, "'%s' --threads 1 %s < '%s' > '%s' 2> '%s'", tu_attn_bin(), args,
             in ? in : "/dev/null", out, err);
    int st = system(cmd);
    free(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A failed CLI run: exit status rc is want_rc and out (its stdout + stderr) holds exactly one
 * "attn: error: " line, which contains needle (NULL: anything). what (the command line) goes
 * into the failure messages. */
static inline void tu_expect_error_output(const char *out, int rc, int want_rc,
                                          const char *needle, const char *what) {
    const char *e = strstr(out, "attn: error: ");
    const char *eol = e ? strchr(e, '\n') : NULL;
    printf("  [%d] %.*s\n", rc, e ? (int)(eol ? eol - e : (long)strlen(e)) : 80, e ? e : out);
    if (rc != want_rc) fail_msg("exit %d, expected %d, for: %s\n%s", rc, want_rc, what, out);
    if (!e) fail_msg("no 'attn: error:' line for: %s\n%s", what, out);
    if (strstr(e + 1, "attn: error: ")) fail_msg("more than one error line: %s", out);
    if (needle && (!strstr(e, needle) || (eol && strstr(e, needle) > eol)))
        fail_msg("error line lacks \"%s\": %s", needle, e);
}

/* The file err_path (a failed run's stderr) is exactly one line "attn: error: ...", containing
 * sub (NULL: anything). */
static inline void tu_expect_error_file(const char *err_path, const char *sub) {
    size_t n;
    char *e = tu_read_all(err_path, &n);
    assert_non_null(e);
    printf("  stderr: %s", e);
    assert_true(!strncmp(e, "attn: error: ", 13));
    char *nl = strchr(e, '\n');
    assert_non_null(nl);
    assert_true(nl[1] == '\0');
    if (sub && !strstr(e, sub)) fail_msg("stderr lacks \"%s\"", sub);
    free(e);
}

/* The file err_path (a `attn translate --stats` run's stderr) is exactly one line "attn: stats:
 * G G multiply-adds in matrix products, S s (...)" with G > 0 and S >= 0. */
static inline void tu_expect_stats_file(const char *err_path) {
    size_t n;
    char *e = tu_read_all(err_path, &n);
    assert_non_null(e);
    printf("  --stats: %s", e ? e : "(none)");
    double g = 0, secs = -1;
    assert_int_equal(sscanf(e, "attn: stats: %lf G multiply-adds in matrix products, %lf s", &g,
                            &secs),
                     2);
    assert_true(g > 0 && secs >= 0 && n > 0 && strchr(e, '\n') == e + n - 1);
    free(e);
}

/* Start the shell command line cmd (`exec` it for the signal to reach the program) with stdout
 * and stderr into a pipe; read that into out[0..cap) until the nth line that begins with
 * `prefix`, send it SIGINT, read the rest and wait. Returns the wait status. */
static inline int tu_sh_interrupt(const char *cmd, const char *prefix, int nth, char *out,
                                  size_t cap) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    assert_non_null(f);
    char line[4096];
    int seen = 0;
    size_t used = 0;
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        used += (size_t)snprintf(out + used, cap - used, "%s", line);
        if (used >= cap) used = cap - 1;
        if (strncmp(line, prefix, strlen(prefix)) == 0 && ++seen == nth) {
            kill(pid, SIGINT);
            break;
        }
    }
    while (fgets(line, sizeof line, f)) {
        used += (size_t)snprintf(out + used, cap - used, "%s", line);
        if (used >= cap) used = cap - 1;
    }
    fclose(f);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

/* Translation test sources: (B, Ts) random ids in [4, V) (0..3 are the special tokens), sentence
 * b ending with eos at len[b] − 1 and padded with 0 after it. */
static inline void tu_make_src(tu_rng *r, int B, int Ts, int V, const int32_t *len, int32_t eos,
                               int32_t *src) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Ts; t++) {
            int32_t id = 4 + (int32_t)(tu_uniform(r, 0, 1) * (V - 4));
            if (id >= V) id = V - 1;
            src[b * Ts + t] = t < len[b] - 1 ? id : t == len[b] - 1 ? eos : 0;
        }
}

#endif

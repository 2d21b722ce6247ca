/* fuzz_cli.c — the command-line parser: `attn` (src/cli/main.c, compiled with
 * -Dmain=attn_cli_main) run on an argument vector made from the input, split at NUL bytes
 * (at most 24 arguments of at most 200 bytes; argv[0] is "attn").
 *
 * So that a run only parses and fails fast, never trains or writes outside its sandbox: standard
 * input is /dev/null, the command runs in an empty scratch directory that is emptied after each
 * run, and inputs with an argument containing '/' or starting with '.' (paths out of the sandbox)
 * or asking for more than 4 threads are skipped. Every command must return 0, 1 or 2 (success,
 * failure, usage error), never crash or exit. Global settings the options change (threads,
 * kernel backend) are restored after each run. */
#include "fuzz.h"

#include "attn_core.h"
#include "attn_kernels.h"

int attn_cli_main(int argc, char **argv);

/* Where sanitizer reports go when stderr is silenced (weak: absent without sanitizers). */
__attribute__((weak)) void __sanitizer_set_report_fd(void *fd);

static int home_fd = -1, devnull = -1, saved_err = -1;
static char sandbox[600];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    home_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (home_fd < 0 || devnull < 0 || !freopen("/dev/null", "r", stdin)) abort();
    snprintf(sandbox, sizeof sandbox, "%s", fuzz_subdir("cwd"));
    /* The CLI's output is noise here. Keep the real stderr for sanitizer reports. */
    fflush(stdout);
    dup2(devnull, 1);
    if (!getenv("ATTN_FUZZ_CLI_VERBOSE")) {
        saved_err = dup(2);
        if (saved_err >= 0 && __sanitizer_set_report_fd)
            __sanitizer_set_report_fd((void *)(intptr_t)saved_err);
    }
    attn_set_num_threads(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAXARGS = 24, MAXLEN = 200 };
    char buf[MAXARGS][MAXLEN + 1];
    char *argv[MAXARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"attn";
    size_t i = 0;
    while (i < size && argc <= MAXARGS) {
        const uint8_t *nul = memchr(data + i, 0, size - i);
        size_t len = nul ? (size_t)(nul - (data + i)) : size - i;
        if (len > MAXLEN) return 0;
        char *a = buf[argc - 1];
        memcpy(a, data + i, len);
        a[len] = '\0';
        if (strchr(a, '/') || a[0] == '.') return 0; /* stay in the sandbox */
        argv[argc++] = a;
        i += len + 1;
    }
    if (i < size) return 0; /* too many arguments */
    argv[argc] = NULL;
    for (int k = 1; k + 1 < argc; k++)
        if (!strcmp(argv[k], "--threads") && atol(argv[k + 1]) > 4) return 0;

    if (chdir(sandbox) != 0) abort();
    int err_fd = -1;
    if (saved_err >= 0) {
        fflush(stderr);
        err_fd = dup(2);
        dup2(devnull, 2);
    }
    int rc = attn_cli_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    if (err_fd >= 0) {
        dup2(err_fd, 2);
        close(err_fd);
    }
    if (fchdir(home_fd) != 0) abort();
    fuzz_rm_rf(sandbox, true);
    attn_set_num_threads(1);
    attn_set_backend(ATTN_BACKEND_AUTO);
    attn_clear_error();
    clearerr(stdin);
    if (rc < 0 || rc > 2) {
        fprintf(stderr, "fuzz_cli: exit code %d\n", rc);
        abort();
    }
    return 0;
}

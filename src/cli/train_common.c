/* train_common.c — the pieces the training commands share (train_common.h). */
#include "train_common.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- processes ---- */

static attn_dist *g_dist;

attn_dist *train_dist(void) { return g_dist; }
bool train_writer(void) { return attn_dist_rank(g_dist) == 0; }

static void dist_at_exit(void) {
    fflush(stdout);
    attn_dist_finalize(g_dist);
    g_dist = NULL;
}

int train_dist_begin(void) {
    if (g_dist) return -1; /* the Python front end trains more than once per process */
    if (attn_dist_launched() && !attn_dist_compiled())
        return cli_fail(attn_set_error(ATTN_STATUS_UNSUPPORTED,
                                       "train: started as one of several MPI ranks, but this attn "
                                       "was built without MPI (install Open MPI: "
                                       "tools/install_deps.sh, then rebuild)"));
    attn_status s = attn_dist_init(600.0, &g_dist);
    if (s) return cli_fail(s);
    /* MPI_Finalize at exit (the Python front end may train again in this process: MPI cannot be
     * initialized twice) */
    atexit(dist_at_exit);
    if (attn_dist_size(g_dist) > 1) {
        cli_set_error_prefix(attn_dist_rank(g_dist), attn_dist_size(g_dist));
        if (attn_dist_rank(g_dist) != 0 && !freopen("/dev/null", "w", stdout)) {
            /* keep the output: only noisier */
        }
    }
    return -1;
}

static double g_abort_delay;

void train_dist_set_abort_delay(double seconds) { g_abort_delay = seconds > 0 ? seconds : 0; }

int train_dist_end(int rc) {
    fflush(stdout);
    fflush(stderr);
    if (rc != 0 && attn_dist_size(g_dist) > 1) {
        if (g_abort_delay > 0) {
            struct timespec ts = {(time_t)g_abort_delay,
                                  (long)((g_abort_delay - (double)(time_t)g_abort_delay) * 1e9)};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
        attn_dist_abort(g_dist, rc);
    }
    return rc;
}

/* ---- time, signals, progress ---- */

double train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void train_fmt_duration(double s, char *buf, size_t cap) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, cap, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else
        snprintf(buf, cap, "%02ld:%02ld", t / 60, t % 60);
}

static volatile sig_atomic_t g_stop = 0;
static _Thread_local train_progress_hook_fn g_hook;
static _Thread_local void *g_hook_ctx;
static _Thread_local bool g_hook_stop;

static void on_signal(int sig) { g_stop = sig; }

void train_catch_signals(void) {
    g_stop = 0; /* a process may train more than once (the Python package) */
    g_hook_stop = false;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

const char *train_stop_reason(double t_start, double time_budget) {
    if (g_stop) return "interrupted";
    if (g_hook_stop) return "stopped by the caller";
    if (time_budget && train_now_s() - t_start >= time_budget) return "time budget reached";
    return NULL;
}

double train_eta(double per_step, int64_t steps_left, double time_budget, double elapsed) {
    double eta = NAN;
    if (time_budget) eta = time_budget - elapsed;
    if (steps_left >= 0) {
        double e2 = per_step * (double)steps_left;
        eta = isnan(eta) ? e2 : fmin(eta, e2);
    }
    return eta;
}

void train_progress(const char *where, double loss, double lr, double tok_s, double elapsed,
                    double eta) {
    char el[32], et[32];
    train_fmt_duration(elapsed, el, sizeof el);
    train_fmt_duration(eta, et, sizeof et);
    printf("%s | loss %7.4f | lr %.2e | %8.0f tok/s | %s elapsed | ETA %s\n", where, loss, lr,
           tok_s, el, et);
    fflush(stdout);
}

void train_set_progress_hook(train_progress_hook_fn fn, void *ctx) {
    g_hook = fn, g_hook_ctx = ctx, g_hook_stop = false;
}

void train_progress_notify(int64_t step, double loss, double lr, double tok_s, double elapsed,
                           double eta) {
    if (g_hook && !g_hook(g_hook_ctx, step, loss, lr, tok_s, elapsed, eta)) g_hook_stop = true;
}

/* ---- small helpers ---- */

char *train_path_in(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

uint64_t train_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ---- checkpoints ---- */

attn_status train_tables_alloc(int n, attn_ckpt_tensor **tensors, attn_optim_range **ranges) {
    *tensors = calloc((size_t)n, sizeof **tensors);
    *ranges = calloc((size_t)n, sizeof **ranges);
    if (!*tensors || !*ranges) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    return ATTN_STATUS_OK;
}

void train_table_set(attn_ckpt_tensor *t, attn_optim_range *r, const char *name, int ndim,
                     const int64_t shape[2], float *params, size_t offset, size_t numel,
                     bool decay) {
    t->name = name;
    t->ndim = ndim;
    t->shape[0] = shape[0];
    t->shape[1] = shape[1];
    t->data = params + offset;
    *r = (attn_optim_range){offset, numel, decay, name};
}

attn_status train_fresh_out(const char *dir, const char *ckpt_dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return attn_set_error(ATTN_STATUS_IO, "%s: cannot create directory: %s", dir,
                              strerror(errno));
    if (attn_ckpt_exists(ckpt_dir))
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s already holds a checkpoint: use --resume to continue it, or "
                              "another --out",
                              dir);
    return ATTN_STATUS_OK;
}

attn_status train_load_state_json(const char *state_path, json_t **root) {
    json_error_t err;
    *root = state_path ? json_load_file(state_path, 0, &err) : NULL;
    if (!*root && !state_path) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    /* A file cut short gets one diagnosis wherever the cut falls (jansson words it after what it
     * expected next: "premature end of input", "... expected near end of file"). */
    if (!*root && (strstr(err.text, "end of file") || strstr(err.text, "end of input")))
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s: unexpected end of input, the file is cut short: %s (line %d)",
                              state_path, err.text, err.line);
    if (!*root)
        return attn_set_error(ATTN_STATUS_FORMAT, "%s: %s (line %d)", state_path, err.text,
                              err.line);
    return ATTN_STATUS_OK;
}

attn_status train_save(const char *dir, const attn_ckpt_tensor *tensors, int ntensors,
                       attn_optim *opt, attn_ckpt_state *cs, int64_t step, int64_t epoch,
                       int64_t position, double lr, json_t *extra) {
    cs->step = step;
    cs->epoch = epoch;
    cs->data_position = position;
    cs->lr = lr;
    if (cs->extra) json_decref(cs->extra);
    cs->extra = extra;
    return attn_ckpt_save(dir, tensors, ntensors, opt, cs);
}

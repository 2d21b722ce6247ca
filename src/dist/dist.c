/* dist.c — rank, size and collectives with a deadline (attn_dist.h).
 *
 * With ATTN_HAVE_MPI (the Makefile defines it when it finds Open MPI) the collectives are MPI's
 * nonblocking ones on a duplicate of MPI_COMM_WORLD whose error handler returns errors; each is
 * polled with MPI_Testall until done, failed or past the deadline, yielding the CPU between polls
 * (ranks are often oversubscribed: more ranks than cores). Without MPI, or when this process was
 * not started by an MPI launcher as one of several ranks, there is one rank and every collective
 * is the identity. */
#include "attn_dist.h"

#include "../core/core-impl.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef ATTN_HAVE_MPI
#include <mpi.h>
#endif

enum { MAX_REQ = 64, MAX_GREQ = 1024 };

struct attn_dist {
    int rank, size;
    double timeout_s;
    bool mpi; /* MPI_Init was called here */
    /* the step's gradient sum (attn_dist_grad_*): buckets [next, nb) of buf are posted */
    float *g_buf;
    size_t g_n, g_bucket, g_nb, g_next;
    bool g_early; /* grad_post from grad_ready */
    attn_dist_stats st;
#ifdef ATTN_HAVE_MPI
    MPI_Comm comm, gcomm; /* gcomm: the gradient buckets' own */
    MPI_Request req[MAX_REQ];
    int n_req;
    MPI_Request greq[MAX_GREQ];
    int n_greq;
#endif
};

bool attn_dist_compiled(void) {
#ifdef ATTN_HAVE_MPI
    return true;
#else
    return false;
#endif
}

const char *attn_dist_library(void) {
#ifdef ATTN_HAVE_MPI
    static char name[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    if (!name[0]) {
        int len = 0;
        if (MPI_Get_library_version(name, &len) != MPI_SUCCESS) len = 0;
        name[len > 0 && len <= MPI_MAX_LIBRARY_VERSION_STRING ? len : 0] = '\0';
        name[strcspn(name, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." */
        if (!name[0]) snprintf(name, sizeof name, "MPI");
    }
    return name;
#else
    return "";
#endif
}

attn_dist_stats attn_dist_get_stats(const attn_dist *d) {
    attn_dist_stats z;
    memset(&z, 0, sizeof z);
    return d ? d->st : z;
}

static int env_int(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : 0;
}

bool attn_dist_launched(void) {
    return env_int("OMPI_COMM_WORLD_SIZE") > 1 || env_int("PMI_SIZE") > 1 ||
           env_int("PMIX_SIZE") > 1;
}

int attn_dist_rank(const attn_dist *d) { return d ? d->rank : 0; }
int attn_dist_size(const attn_dist *d) { return d ? d->size : 1; }
double attn_dist_timeout(const attn_dist *d) { return d ? d->timeout_s : 0; }

void attn_dist_set_timeout(attn_dist *d, double timeout_s) {
    if (d && timeout_s > 0) d->timeout_s = timeout_s;
}

attn_status attn_dist_init(double timeout_s, attn_dist **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL argument");
    *out = NULL;
    if (!(timeout_s > 0))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: the timeout must be > 0 s (got %g)",
                         timeout_s);
    attn_dist *d = attn_calloc(sizeof *d);
    if (!d) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "dist: out of memory");
    d->rank = 0, d->size = 1, d->timeout_s = timeout_s;
#ifdef ATTN_HAVE_MPI
    d->comm = d->gcomm = MPI_COMM_NULL;
    if (attn_dist_launched()) {
        int provided = 0, inited = 0;
        MPI_Initialized(&inited);
        if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            attn_free(d);
            return attn_fail(ATTN_STATUS_IO, "dist: MPI_Init_thread failed");
        }
        d->mpi = !inited;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if (MPI_Comm_dup(MPI_COMM_WORLD, &d->comm) != MPI_SUCCESS) {
            attn_dist_finalize(d);
            return attn_fail(ATTN_STATUS_IO, "dist: MPI_Comm_dup failed");
        }
        MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
        if (MPI_Comm_dup(MPI_COMM_WORLD, &d->gcomm) != MPI_SUCCESS) {
            MPI_Comm_free(&d->comm);
            attn_dist_finalize(d);
            return attn_fail(ATTN_STATUS_IO, "dist: MPI_Comm_dup failed");
        }
        MPI_Comm_set_errhandler(d->gcomm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(d->comm, &d->rank);
        MPI_Comm_size(d->comm, &d->size);
    }
#endif
    *out = d;
    return ATTN_STATUS_OK;
}

void attn_dist_finalize(attn_dist *d) {
    if (!d) return;
#ifdef ATTN_HAVE_MPI
    if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
    if (d->gcomm != MPI_COMM_NULL) MPI_Comm_free(&d->gcomm);
    if (d->mpi) MPI_Finalize();
#endif
    attn_free(d);
}

void attn_dist_abort(attn_dist *d, int code) {
#ifdef ATTN_HAVE_MPI
    if (d && d->size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    (void)d;
    exit(code);
}

#ifdef ATTN_HAVE_MPI
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "rank 1 of 2: all-reduce failed: <MPI's message>" */
static attn_status mpi_fail(const attn_dist *d, const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    msg[0] = '\0';
    if (MPI_Error_string(rc, msg, &len) == MPI_SUCCESS && len >= 0 && len <= MPI_MAX_ERROR_STRING)
        msg[len] = '\0';
    return attn_fail(ATTN_STATUS_IO, "rank %d of %d: %s failed: %s", d->rank, d->size, what,
                     msg[0] ? msg : "MPI error");
}

static attn_status wait_reqs_(attn_dist *d, MPI_Request *req, int *n, const char *what);

/* Polls req[0..*n) to completion, error or the deadline (*n is 0 after). */
static attn_status wait_reqs(attn_dist *d, MPI_Request *req, int *n, const char *what) {
    const double t0 = now_s();
    attn_status s = ATTN_STATUS_OK;
    if (*n > 0) {
        s = wait_reqs_(d, req, n, what);
        d->st.wait_s += now_s() - t0;
    }
    return s;
}

static attn_status wait_reqs_(attn_dist *d, MPI_Request *req, int *n, const char *what) {
    const double deadline = now_s() + d->timeout_s;
    long polls = 0;
    while (*n > 0) {
        int done = 0;
        int rc = MPI_Testall(*n, req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            *n = 0;
            return mpi_fail(d, what, rc);
        }
        if (done) {
            *n = 0;
            break;
        }
        if (now_s() > deadline) {
            *n = 0; /* left posted: the caller can only abort now */
            if (d->size == 2)
                return attn_fail(ATTN_STATUS_IO,
                                 "rank %d of 2: %s: no answer from rank %d within %g s (it died, "
                                 "hangs, or the network between them failed)",
                                 d->rank, what, 1 - d->rank, d->timeout_s);
            return attn_fail(ATTN_STATUS_IO,
                             "rank %d of %d: %s: not complete within %g s (a rank died or hangs, "
                             "or the network failed)",
                             d->rank, d->size, what, d->timeout_s);
        }
        /* spin politely for a while, then sleep up to 1 ms between polls */
        if (++polls < 2000) {
            sched_yield();
        } else {
            struct timespec ts = {0, polls < 20000 ? 50000 : 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return ATTN_STATUS_OK;
}

static attn_status wait_all(attn_dist *d, const char *what) {
    return wait_reqs(d, d->req, &d->n_req, what);
}

static attn_status post_check(attn_dist *d, const char *what, int rc) {
    if (rc == MPI_SUCCESS) return ATTN_STATUS_OK;
    /* already posted ones cannot be cancelled; the caller aborts */
    d->n_req = 0;
    return mpi_fail(d, what, rc);
}
#endif

attn_status attn_dist_allreduce_sum(attn_dist *d, float *buf, size_t n, size_t bucket_floats) {
    if (!d) return ATTN_STATUS_OK;
    if (n && !buf) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL buffer");
#ifdef ATTN_HAVE_MPI
    if (d->size < 2 || n == 0) return ATTN_STATUS_OK;
    size_t bucket = bucket_floats ? bucket_floats : ((size_t)4 << 20);
    if (bucket > (size_t)INT_MAX) bucket = (size_t)INT_MAX;
    ATTN_TRY(wait_all(d, "all-reduce"));
    for (size_t a = 0; a < n; a += bucket) {
        if (d->n_req == MAX_REQ) ATTN_TRY(wait_all(d, "all-reduce"));
        const int cnt = (int)(n - a < bucket ? n - a : bucket);
        ATTN_TRY(post_check(d, "all-reduce",
                            MPI_Iallreduce(MPI_IN_PLACE, buf + a, cnt, MPI_FLOAT, MPI_SUM, d->comm,
                                           &d->req[d->n_req])));
        d->n_req++;
    }
    return wait_all(d, "all-reduce");
#else
    (void)bucket_floats;
    return ATTN_STATUS_OK;
#endif
}

attn_status attn_dist_grad_begin(attn_dist *d, float *buf, size_t n, size_t bucket_floats) {
    if (!d) return ATTN_STATUS_OK;
    if (n && !buf) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL buffer");
    size_t bucket = bucket_floats ? bucket_floats : ((size_t)1 << 20);
    if (bucket > (size_t)INT_MAX) bucket = (size_t)INT_MAX;
    d->g_buf = buf, d->g_n = n, d->g_bucket = bucket;
    d->g_nb = d->g_next = (n + bucket - 1) / bucket;
    return ATTN_STATUS_OK;
}

/* Posts buckets g_next-1 down to first (those from bucket `first` on). */
static attn_status grad_post(attn_dist *d, size_t first) {
#ifdef ATTN_HAVE_MPI
    if (d->size < 2) {
        d->g_next = first;
        return ATTN_STATUS_OK;
    }
    while (d->g_next > first) {
        if (d->n_greq == MAX_GREQ)
            ATTN_TRY(wait_reqs(d, d->greq, &d->n_greq, "all-reduce of the gradients"));
        const size_t k = --d->g_next, a = k * d->g_bucket;
        const int cnt = (int)(d->g_n - a < d->g_bucket ? d->g_n - a : d->g_bucket);
        int rc = MPI_Iallreduce(MPI_IN_PLACE, d->g_buf + a, cnt, MPI_FLOAT, MPI_SUM, d->gcomm,
                                &d->greq[d->n_greq]);
        if (rc != MPI_SUCCESS) {
            d->n_greq = 0;
            return mpi_fail(d, "all-reduce of the gradients", rc);
        }
        d->n_greq++;
        d->st.grad_buckets++;
        d->st.early_buckets += d->g_early;
        d->st.grad_bytes += (uint64_t)cnt * sizeof(float);
    }
    /* let MPI move the posted ones on (it progresses only inside its calls) */
    int done = 0;
    if (d->n_greq > 0) {
        int rc = MPI_Testall(d->n_greq, d->greq, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            d->n_greq = 0;
            return mpi_fail(d, "all-reduce of the gradients", rc);
        }
        if (done) d->n_greq = 0;
    }
#else
    d->g_next = first;
#endif
    return ATTN_STATUS_OK;
}

attn_status attn_dist_grad_ready(attn_dist *d, size_t from) {
    if (!d || !d->g_buf) return ATTN_STATUS_OK;
    if (from > d->g_n) from = d->g_n;
    /* the first bucket wholly inside [from, n); the last one may be short */
    const size_t first = (from + d->g_bucket - 1) / d->g_bucket;
    if (first >= d->g_next) return ATTN_STATUS_OK;
    d->g_early = true;
    attn_status s = grad_post(d, first);
    d->g_early = false;
    return s;
}

attn_status attn_dist_grad_finish(attn_dist *d) {
    if (!d || !d->g_buf) return ATTN_STATUS_OK;
    attn_status s = grad_post(d, 0);
#ifdef ATTN_HAVE_MPI
    const double w0 = d->st.wait_s;
    if (!s) s = wait_reqs(d, d->greq, &d->n_greq, "all-reduce of the gradients");
    d->st.grad_wait_s += d->st.wait_s - w0;
#endif
    if (d->size > 1) d->st.grad_steps++;
    d->g_buf = NULL;
    return s;
}

attn_status attn_dist_allreduce_f64(attn_dist *d, double *v, size_t n, attn_dist_op op) {
    if (!d) return ATTN_STATUS_OK;
    if (n && !v) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL buffer");
#ifdef ATTN_HAVE_MPI
    if (d->size < 2 || n == 0) return ATTN_STATUS_OK;
    if (n > (size_t)INT_MAX) return attn_fail(ATTN_STATUS_TOO_LARGE, "dist: %zu doubles", n);
    ATTN_TRY(wait_all(d, "all-reduce")); /* one collective at a time from here */
    ATTN_TRY(post_check(d, "all-reduce",
                        MPI_Iallreduce(MPI_IN_PLACE, v, (int)n, MPI_DOUBLE,
                                       op == ATTN_DIST_MAX ? MPI_MAX : MPI_SUM, d->comm,
                                       &d->req[0])));
    d->n_req = 1;
    return wait_all(d, "all-reduce");
#else
    (void)op;
    return ATTN_STATUS_OK;
#endif
}

attn_status attn_dist_broadcast(attn_dist *d, void *buf, size_t bytes, int root) {
    if (!d) return ATTN_STATUS_OK;
    if (bytes && !buf) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL buffer");
    if (root < 0 || root >= d->size)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: root %d outside 0..%d", root,
                         d->size - 1);
#ifdef ATTN_HAVE_MPI
    if (d->size < 2) return ATTN_STATUS_OK;
    ATTN_TRY(wait_all(d, "broadcast"));
    const size_t chunk = (size_t)1 << 30;
    for (size_t a = 0; a < bytes; a += chunk) {
        const int cnt = (int)(bytes - a < chunk ? bytes - a : chunk);
        ATTN_TRY(post_check(d, "broadcast",
                            MPI_Ibcast((char *)buf + a, cnt, MPI_BYTE, root, d->comm,
                                       &d->req[0])));
        d->n_req = 1;
        ATTN_TRY(wait_all(d, "broadcast"));
    }
#endif
    return ATTN_STATUS_OK;
}

attn_status attn_dist_allgather(attn_dist *d, float *buf, const size_t *offsets) {
    if (!d) return ATTN_STATUS_OK;
    if (!buf || !offsets) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL argument");
#ifdef ATTN_HAVE_MPI
    if (d->size < 2) return ATTN_STATUS_OK;
    int *cnt = attn_alloc(2 * (size_t)d->size * sizeof(int));
    if (!cnt) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "dist: out of memory");
    int *dsp = cnt + d->size;
    attn_status s = ATTN_STATUS_OK;
    for (int r = 0; r < d->size && !s; r++) {
        if (offsets[r + 1] < offsets[r] || offsets[r + 1] > (size_t)INT_MAX)
            s = attn_fail(ATTN_STATUS_TOO_LARGE,
                          "dist: all-gather share %d [%zu, %zu) is not below 2^31 floats", r,
                          offsets[r], offsets[r + 1]);
        else
            cnt[r] = (int)(offsets[r + 1] - offsets[r]), dsp[r] = (int)offsets[r];
    }
    if (!s) s = wait_all(d, "all-gather");
    if (!s)
        s = post_check(d, "all-gather",
                       MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp,
                                       MPI_FLOAT, d->comm, &d->req[0]));
    if (!s) {
        d->n_req = 1;
        s = wait_all(d, "all-gather");
    }
    attn_free(cnt);
    return s;
#else
    return ATTN_STATUS_OK;
#endif
}

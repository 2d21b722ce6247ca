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

enum { MAX_REQ = 64 };

struct attn_dist {
    int rank, size;
    double timeout_s;
    bool mpi; /* MPI_Init was called here */
#ifdef ATTN_HAVE_MPI
    MPI_Comm comm;
    MPI_Request req[MAX_REQ];
    int n_req;
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
    if (d->size > 1 && d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
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

/* Polls the posted requests to completion, error or the deadline. */
static attn_status wait_all(attn_dist *d, const char *what) {
    const double deadline = now_s() + d->timeout_s;
    long polls = 0;
    while (d->n_req > 0) {
        int done = 0;
        int rc = MPI_Testall(d->n_req, d->req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            d->n_req = 0;
            return mpi_fail(d, what, rc);
        }
        if (done) {
            d->n_req = 0;
            break;
        }
        if (now_s() > deadline) {
            d->n_req = 0; /* left posted: the caller can only abort now */
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

static attn_status post_check(attn_dist *d, const char *what, int rc) {
    if (rc == MPI_SUCCESS) return ATTN_STATUS_OK;
    /* already posted ones cannot be cancelled; the caller aborts */
    d->n_req = 0;
    return mpi_fail(d, what, rc);
}
#endif

attn_status attn_dist_allreduce_post(attn_dist *d, float *buf, size_t n, size_t bucket_floats) {
    if (!d) return ATTN_STATUS_OK;
    if (n && !buf) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL buffer");
#ifdef ATTN_HAVE_MPI
    if (d->size < 2 || n == 0) return ATTN_STATUS_OK;
    size_t bucket = bucket_floats ? bucket_floats : ((size_t)4 << 20);
    if (bucket > (size_t)INT_MAX) bucket = (size_t)INT_MAX;
    /* more buckets than request slots: larger buckets */
    const size_t slots = (size_t)(MAX_REQ - d->n_req);
    if (slots == 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "dist: %d collectives already posted (wait for them first)", MAX_REQ);
    if ((n + bucket - 1) / bucket > slots) bucket = (n + slots - 1) / slots;
    if (bucket > (size_t)INT_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "dist: %zu floats are too many to post at once",
                         n);
    for (size_t a = 0; a < n; a += bucket) {
        const int cnt = (int)(n - a < bucket ? n - a : bucket);
        ATTN_TRY(post_check(d, "all-reduce",
                            MPI_Iallreduce(MPI_IN_PLACE, buf + a, cnt, MPI_FLOAT, MPI_SUM, d->comm,
                                           &d->req[d->n_req])));
        d->n_req++;
    }
#else
    (void)bucket_floats;
#endif
    return ATTN_STATUS_OK;
}

attn_status attn_dist_progress(attn_dist *d) {
    if (!d) return ATTN_STATUS_OK;
#ifdef ATTN_HAVE_MPI
    if (d->n_req > 0) {
        int done = 0;
        int rc = MPI_Testall(d->n_req, d->req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            d->n_req = 0;
            return mpi_fail(d, "all-reduce", rc);
        }
        if (done) d->n_req = 0;
    }
#endif
    return ATTN_STATUS_OK;
}

attn_status attn_dist_wait(attn_dist *d) {
    if (!d) return ATTN_STATUS_OK;
#ifdef ATTN_HAVE_MPI
    return wait_all(d, "all-reduce of the gradients");
#else
    return ATTN_STATUS_OK;
#endif
}

attn_status attn_dist_allreduce_sum(attn_dist *d, float *buf, size_t n, size_t bucket_floats) {
    ATTN_TRY(attn_dist_allreduce_post(d, buf, n, bucket_floats));
    return attn_dist_wait(d);
}

attn_status attn_dist_allreduce_f64(attn_dist *d, double *v, size_t n, attn_dist_op op) {
    if (!d) return ATTN_STATUS_OK;
    if (n && !v) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "dist: NULL buffer");
#ifdef ATTN_HAVE_MPI
    if (d->size < 2 || n == 0) return ATTN_STATUS_OK;
    if (n > (size_t)INT_MAX) return attn_fail(ATTN_STATUS_TOO_LARGE, "dist: %zu doubles", n);
    ATTN_TRY(attn_dist_wait(d)); /* one collective at a time from here */
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
    ATTN_TRY(attn_dist_wait(d));
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
    if (!s) s = attn_dist_wait(d);
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

/* attn_dist.h — processes that train together: rank, size and the collectives data-parallel
 * training needs (sum of a float buffer in buckets, sums and maxima of a few doubles, broadcast,
 * all-gather), over MPI when libattn was built with it (Open MPI: `make` finds mpicc), else a
 * single process where every collective is the identity.
 *
 *   attn_dist *d = NULL;
 *   if (attn_dist_init(600.0, &d)) fail(attn_last_error());   // MPI_Init under mpirun
 *   ... every rank builds the same global batch, takes its slice, backward ...
 *   if (attn_dist_allreduce_sum(d, grads, num_params, 0)) {      // the gradients summed
 *                                                    // (or attn_dist_grad_*: during backward)
 *       fprintf(stderr, "%s\n", attn_last_error());             // names this rank and the call
 *       attn_dist_abort(d, 1);                                  // ends every rank: no hang
 *   }
 *   attn_dist_finalize(d);
 *
 * Every collective has a timeout: it is posted nonblocking (MPI_I*) and polled (MPI_Test) until a
 * deadline; a rank that died, a network that failed or a peer that took another path then gives
 * ATTN_STATUS_IO with a message naming this rank, the collective and the timeout, instead of a
 * hang. The communicator returns errors (MPI_ERRORS_RETURN) rather than aborting inside MPI, so
 * those become statuses too. After a failed collective the only thing left to do is
 * attn_dist_abort: a posted MPI collective cannot be cancelled.
 *
 * Collectives are called from one thread (MPI_THREAD_FUNNELED), by every rank in the same order
 * with the same sizes. The library never prints or exits; attn_dist_abort is the one call that
 * ends the process (MPI_Abort), for the front end to make. */
#ifndef ATTN_DIST_H
#define ATTN_DIST_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_dist attn_dist;

/* Whether this libattn was built with MPI. */
bool attn_dist_compiled(void);
/* The MPI library's name and version ("Open MPI v4.1.4"), or "" without MPI. */
const char *attn_dist_library(void);
/* Whether the environment says an MPI launcher (mpirun / mpiexec) started this process as one of
 * several ranks (Open MPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE / PMIX_SIZE > 1). */
bool attn_dist_launched(void);

/* Joins the job: MPI_Init_thread (funneled) when built with MPI and attn_dist_launched(), else a
 * single process (rank 0 of 1, no MPI call ever made). timeout_s (> 0): the limit of every
 * collective. */
attn_status attn_dist_init(double timeout_s, attn_dist **out);
/* MPI_Finalize (when it was initialized) and frees d. NULL is a no-op. */
void attn_dist_finalize(attn_dist *d);
/* Ends every rank of the job with exit code code (MPI_Abort), or this process (single). */
void attn_dist_abort(attn_dist *d, int code);

/* A NULL d is one process: rank 0 of 1, every collective the identity. */
int attn_dist_rank(const attn_dist *d); /* 0 for NULL */
int attn_dist_size(const attn_dist *d); /* 1 for NULL */
void attn_dist_set_timeout(attn_dist *d, double timeout_s);
double attn_dist_timeout(const attn_dist *d);

/* buf[0..n) = the sum over the ranks of their buf (in place), as bucket_floats-sized
 * MPI_Iallreduce's in flight together (0: 4 Mi floats; MPI counts are ints). The sum order is
 * MPI's: the result is the same on every rank, but not the serial sum bit for bit. */
attn_status attn_dist_allreduce_sum(attn_dist *d, float *buf, size_t n, size_t bucket_floats);

/* The gradient sum of a training step, overlapped with its backward: begin names the buffer
 * (n floats, cut into a fixed grid of bucket_floats-sized buckets; 0: 1 Mi floats); each
 * grad_ready(from) says that buf[from..n) is final, and the buckets wholly inside it that are not
 * yet posted are posted now (MPI_Iallreduce, in place, last bucket first); finish posts the rest
 * and waits for all. The buckets depend on n and bucket_floats alone and are posted in the same
 * order whenever grad_ready comes, so ranks that report at different times (or not at all) still
 * match. These run on a communicator of their own: other collectives may come in between. The
 * buffer must not change where it was reported final. */
attn_status attn_dist_grad_begin(attn_dist *d, float *buf, size_t n, size_t bucket_floats);
attn_status attn_dist_grad_ready(attn_dist *d, size_t from);
attn_status attn_dist_grad_finish(attn_dist *d);

/* What the collectives of this process did so far (all zero for one process). */
typedef struct {
    uint64_t grad_steps;    /* attn_dist_grad_finish calls */
    uint64_t grad_bytes;    /* bytes of gradients all-reduced (this rank's buffer, not the wire) */
    uint64_t grad_buckets;  /* buckets posted */
    uint64_t early_buckets; /* of them, posted by attn_dist_grad_ready (during the backward) */
    double wait_s;          /* seconds spent waiting for collectives to complete */
    double grad_wait_s;     /* of them, in attn_dist_grad_finish (what the overlap left over) */
} attn_dist_stats;
attn_dist_stats attn_dist_get_stats(const attn_dist *d);

typedef enum { ATTN_DIST_SUM = 0, ATTN_DIST_MAX } attn_dist_op;
/* v[0..n) = the sum or maximum over the ranks (doubles: counts, losses, flags). */
attn_status attn_dist_allreduce_f64(attn_dist *d, double *v, size_t n, attn_dist_op op);
/* bytes of buf from rank root to every rank. */
attn_status attn_dist_broadcast(attn_dist *d, void *buf, size_t bytes, int root);
/* buf holds every rank's share back to back: rank r's is buf[offsets[r] .. offsets[r + 1]);
 * after the call every rank has all of them (offsets: size + 1 entries, the same on every rank). */
attn_status attn_dist_allgather(attn_dist *d, float *buf, const size_t *offsets);

#ifdef __cplusplus
}
#endif
#endif

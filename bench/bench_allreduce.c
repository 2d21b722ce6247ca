/* bench_allreduce.c — MPI_Allreduce (float32, MPI_SUM: what data-parallel training does to its
 * gradients each step) over a range of buffer sizes, on whatever transport mpirun gives it:
 *   mpirun -np 2 build/bench/bench_allreduce                                 shared memory (vader)
 *   mpirun -np 2 --mca pml ob1 --mca btl tcp,self build/bench/bench_allreduce   TCP over loopback
 *   sh tools/netns_2host.sh build/bench/bench_allreduce                      TCP across a veth pair
 * (tools/allreduce_runs.sh runs all three.) Not linked with libattn; built by mk/mpinet.mk only
 * where Open MPI's mpicc is installed.
 *
 * For each size (bytes; every power of two from --min to --max, default 4 KiB .. 64 MiB, plus one
 * 8-byte row for the latency of a tiny all-reduce): W warm-up calls (2), the first of them checked
 * element by element against the exact sum (integers < 2^24: exact in float32), then N timed calls
 * (N = clamp(--volume / bytes, --min-iters, --max-iters): defaults 512 MiB, 5, 2000). Each call is
 * timed on every rank; the call's time is the slowest rank's (an MPI_MAX over the per-call times
 * after the loop, so no barrier sits between the calls). Printed per size:
 *   time_us   mean time of one all-reduce (the slowest rank's); median_us and min_us: the median
 *             and the fastest call (on a busy machine the mean carries every preemption)
 *   algbw     bytes / mean time (GB/s, 1e9 bytes): the buffer's rate as the application sees it
 *   busbw     algbw * 2(n-1)/n: what each rank's link carries in a ring all-reduce (reduce-scatter
 *             then all-gather: every rank sends and receives 2(n-1)/n of the buffer), comparable
 *             across rank counts and with the link's bandwidth (nccl-tests' definition);
 *             busbw_med: the same from the median time
 * Options: --min BYTES, --max BYTES, --volume BYTES, --min-iters N, --max-iters N, --warmup N,
 * --label TEXT (printed in the header and the JSON), --json (also one JSON line per size:
 * {"bench":"allreduce","label":...,"ranks":...,"bytes":...,"iters":...,"time_us":...,"min_us":...,
 * "median_us":...,"algbw_GBs":...,"busbw_GBs":...,"busbw_median_GBs":...}).
 * Exit status 1 when a check fails (on any rank), 2 on a bad option. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t min_bytes, max_bytes, volume;
    int min_iters, max_iters, warmup;
    const char *label;
    int json;
} options;

static int parse_size(const char *s, size_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    if (*end == 'K' || *end == 'k') v *= 1024, end++;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024, end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    if (*end) return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!v) return -1;
        if (!strcmp(a, "--min")) bad = parse_size(v, &o->min_bytes);
        else if (!strcmp(a, "--max")) bad = parse_size(v, &o->max_bytes);
        else if (!strcmp(a, "--volume")) bad = parse_size(v, &o->volume);
        else if (!strcmp(a, "--min-iters")) o->min_iters = atoi(v);
        else if (!strcmp(a, "--max-iters")) o->max_iters = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--label")) o->label = v;
        else return -1;
        if (bad) return -1;
        i++;
    }
    if (o->min_bytes < 4 || o->max_bytes < o->min_bytes || o->max_bytes > (1u << 30) || o->min_iters < 1 ||
        o->max_iters < o->min_iters || o->warmup < 1)
        return -1;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* element i of rank r: i % 1021 + 1000 r + 1; their sum over n ranks is exact in float32 */
static void fill(float *x, size_t n, int rank) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1021 + 1000 * (size_t)rank + 1);
}

static size_t count_wrong(const float *x, size_t n, int size) {
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        const float want = (float)((size_t)size * (i % 1021 + 1) + 1000 * (size_t)size * (size - 1) / 2);
        wrong += x[i] != want;
    }
    return wrong;
}

/* One size: the check, then the timed calls. Returns 0, or 1 when the check failed anywhere. */
static int run_size(const options *o, size_t bytes, float *buf, double *t, int rank, int size) {
    const size_t n = bytes / sizeof(float);
    size_t iters = o->volume / bytes;
    if (iters < (size_t)o->min_iters) iters = (size_t)o->min_iters;
    if (iters > (size_t)o->max_iters) iters = (size_t)o->max_iters;
    fill(buf, n, rank);
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int bad = count_wrong(buf, n, size) != 0, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        if (bad) fprintf(stderr, "bench_allreduce: rank %d: wrong sum at %zu bytes\n", rank, bytes);
        return 1;
    }
    for (int w = 1; w < o->warmup; w++)
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    for (size_t k = 0; k < iters; k++) {
        const double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t[k] = MPI_Wtime() - t0;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, (int)iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        double sum = 0;
        for (size_t k = 0; k < iters; k++) sum += t[k];
        qsort(t, iters, sizeof *t, cmp_double);
        const double mean = sum / (double)iters, best = t[0], med = t[iters / 2];
        const double algbw = (double)bytes / mean / 1e9;
        const double busbw = algbw * 2.0 * (size - 1) / size;
        printf("%12zu %6zu %10.1f %10.1f %10.1f %10.3f %10.3f %10.3f\n", bytes, iters, mean * 1e6,
               med * 1e6, best * 1e6, algbw, busbw, busbw * mean / med);
        if (o->json)
            printf("{\"bench\":\"allreduce\",\"label\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"iters\":%zu,"
                   "\"time_us\":%.2f,\"median_us\":%.2f,\"min_us\":%.2f,\"algbw_GBs\":%.4f,"
                   "\"busbw_GBs\":%.4f,\"busbw_median_GBs\":%.4f}\n",
                   o->label, size, bytes, iters, mean * 1e6, med * 1e6, best * 1e6, algbw, busbw,
                   busbw * mean / med);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o = {4096, 64u << 20, 512u << 20, 5, 2000, 2, "", 0};
    if (parse_args(argc, argv, &o)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np N bench_allreduce [--min BYTES] [--max BYTES] "
                            "[--volume BYTES] [--min-iters N] [--max-iters N] [--warmup N] "
                            "[--label TEXT] [--json]   (sizes: 4096, 64K, 16MiB, ...)\n");
        MPI_Finalize();
        return 2;
    }
    float *buf = malloc(o.max_bytes < 8 ? 8 : o.max_bytes);
    double *t = malloc((size_t)o.max_iters * sizeof *t);
    if (!buf || !t) {
        fprintf(stderr, "bench_allreduce: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        char *comma = strchr(lib, ',');
        if (comma) *comma = 0;
        printf("# bench_allreduce: %d ranks, float32 MPI_SUM, %s%s%s\n", size, lib,
               *o.label ? ", " : "", o.label);
        printf("# %10s %6s %10s %10s %10s %10s %10s %10s\n", "bytes", "iters", "time_us", "median_us",
               "min_us", "algbw_GB/s", "busbw_GB/s", "busbw_med");
        fflush(stdout);
    }
    int bad = run_size(&o, 8, buf, t, rank, size);
    for (size_t b = o.min_bytes; !bad && b <= o.max_bytes; b *= 2) bad = run_size(&o, b, buf, t, rank, size);
    free(buf);
    free(t);
    MPI_Finalize();
    return bad;
}

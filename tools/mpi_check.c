/* mpi_check.c — does an MPI job work, and on which hosts? Each rank prints one line (its rank, the
 * job's size, the host name MPI reports and the rank's IPv4 addresses other than loopback), then
 * all ranks sum float buffers with MPI_Allreduce and compare every element with the exact sum
 * (integers below 2^24, exact in float32, whatever order the sum is taken in). Sizes: 1 element,
 * 1000, 262147 (an odd size over 1 MiB) and 4 Mi elements (16 MiB: several ring/segment chunks).
 * Also MPI_Allreduce(MPI_SUM) of a double and MPI_Bcast of a string from rank 0.
 * Exit status 0 when every check passes on every rank, 1 otherwise (the ranks agree on it through
 * one more MPI_Allreduce(MPI_MAX)); rank 0 then prints "mpi_check: N ranks: ok" or "... FAILED".
 * tools/netns_2host.sh runs it as its self-test (make mpi-check; mk/mpinet.mk). */
#include <mpi.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rank's IPv4 addresses but 127.*, comma-separated, into buf. */
static void ipv4_addrs(char *buf, size_t n) {
    struct ifaddrs *ifs, *i;
    buf[0] = 0;
    if (getifaddrs(&ifs) != 0) {
        snprintf(buf, n, "?");
        return;
    }
    for (i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        char a[INET_ADDRSTRLEN];
        const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)i->ifa_addr;
        if (!inet_ntop(AF_INET, &s->sin_addr, a, sizeof a) || strncmp(a, "127.", 4) == 0) continue;
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%s=%s", l ? "," : "", i->ifa_name, a);
    }
    freeifaddrs(ifs);
    if (!buf[0]) snprintf(buf, n, "(none)");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME], addrs[512];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    ipv4_addrs(addrs, sizeof addrs);
    printf("mpi_check: rank %d of %d on %s, addresses %s\n", rank, size, host, addrs);
    fflush(stdout);

    int bad = 0;
    const int sizes[] = {1, 1000, 262147, 4 << 20};
    float *buf = malloc((size_t)(4 << 20) * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "mpi_check: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        /* element i of rank r: (i % 1021) + 1000 r + 1; the sum over ranks:
         * size (i % 1021 + 1) + 1000 size (size - 1) / 2 */
        for (int i = 0; i < n; i++) buf[i] = (float)(i % 1021 + 1000 * rank + 1);
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        int wrong = 0, first = -1;
        for (int i = 0; i < n; i++) {
            const float want = (float)(size * (i % 1021 + 1) + 1000 * size * (size - 1) / 2);
            if (buf[i] != want) {
                if (first < 0) first = i;
                wrong++;
            }
        }
        if (wrong) {
            fprintf(stderr,
                    "mpi_check: rank %d: all-reduce of %d floats: %d elements wrong, first [%d] = "
                    "%g\n",
                    rank, n, wrong, first, (double)buf[first]);
            bad = 1;
        }
    }
    free(buf);
    double d = rank + 0.5, dsum = 0;
    MPI_Allreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (dsum != size * (size - 1) / 2.0 + size * 0.5) {
        fprintf(stderr, "mpi_check: rank %d: double sum %g\n", rank, dsum);
        bad = 1;
    }
    char msg[32] = {0};
    if (rank == 0) snprintf(msg, sizeof msg, "hello from rank 0");
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (strcmp(msg, "hello from rank 0") != 0) {
        fprintf(stderr, "mpi_check: rank %d: broadcast gave \"%.31s\"\n", rank, msg);
        bad = 1;
    }
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("mpi_check: %d ranks: %s\n", size, any_bad ? "FAILED" : "ok");
    MPI_Finalize();
    return any_bad ? 1 : 0;
}

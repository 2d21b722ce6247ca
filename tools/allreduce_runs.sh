#!/bin/sh
# allreduce_runs.sh — bench_allreduce on every transport a 2-rank job has on this machine, one run
# after the other, each with the machine's load before it (uptime):
#   1. shared memory: mpirun -np 2 (Open MPI's vader BTL)
#   2. TCP over loopback: --mca pml ob1 --mca btl tcp,self
#   3. TCP across a veth pair between two network namespaces (tools/netns_2host.sh; needs root:
#      reported as skipped with the reason otherwise)
#   4. the same veth limited to each rate in ALLREDUCE_RATES (tc tbf; e.g. "1gbit 10gbit"): a
#      stand-in for a real network, to check docs/distributed-scaling.md's time model against
#   sh tools/allreduce_runs.sh [BUILD] [bench_allreduce options...]
# Every run's table is printed as it is (nothing is dropped or averaged across runs).
# docs/distributed-scaling.md records the numbers. Timing: run it on a quiet machine; the ranks
# busy-poll, so a third process on a 2-core machine shows in the mean (compare the median).
BUILD=${1:-build}; [ $# -gt 0 ] && shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
B="$BUILD/bench/bench_allreduce"
[ -x "$B" ] || { echo "error: $B missing: make BUILD=$BUILD bench-allreduce"; exit 1; }
root_arg=""
[ "$(id -u)" -eq 0 ] && root_arg=--allow-run-as-root
rc=0
run() {
  echo
  echo "== $1 (load: $(cut -d' ' -f1-3 /proc/loadavg))"
}
run "shared memory: mpirun -np 2 --bind-to none"
mpirun $root_arg -np 2 --bind-to none "$B" --label "shared memory (vader)" "$@" || rc=1
run "TCP loopback: mpirun -np 2 --mca pml ob1 --mca btl tcp,self"
mpirun $root_arg -np 2 --bind-to none --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
  "$B" --label "TCP loopback" "$@" || rc=1
run "TCP across a veth pair: tools/netns_2host.sh"
sh tools/netns_2host.sh "$B" --label "TCP veth, 2 namespaces" "$@"
r=$?
[ $r -eq 77 ] && echo "(skipped)"
[ $r -ne 0 ] && [ $r -ne 77 ] && rc=1
for rate in ${ALLREDUCE_RATES:-}; do
  run "TCP across the veth pair limited to $rate (tc tbf): NETNS_RATE=$rate tools/netns_2host.sh"
  NETNS_RATE=$rate sh tools/netns_2host.sh "$B" --label "TCP veth at $rate" "$@"
  r=$?
  [ $r -eq 77 ] && echo "(skipped)"
  [ $r -ne 0 ] && [ $r -ne 77 ] && rc=1
done
exit $rc

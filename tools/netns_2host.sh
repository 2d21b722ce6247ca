#!/bin/sh
# netns_2host.sh — run a command as a 2-rank MPI job on "two hosts" made on this machine: two
# network namespaces (iproute2's `ip netns`) joined by a veth pair, one rank in each, Open MPI
# talking TCP over the pair only (issue 19's two-host check).
#
#   sh tools/netns_2host.sh CMD [ARGS...]     mpirun -np 2 CMD ARGS (rank 0 on h0, rank 1 on h1)
#   sh tools/netns_2host.sh --selftest [BUILD] the same with BUILD/tools/mpi_check (make mpi-check:
#                                             an all-reduce of up to 16 MiB checked element by
#                                             element), and a check that the veth carried it
#
# The two hosts:
#   h0: namespace $NETNS_NAME-0, interface mpi0 = 10.77.0.1/24, its own host name (UTS namespace)
#       "$NETNS_NAME-h0"; mpirun runs here, and rank 0.
#   h1: namespace $NETNS_NAME-1, interface mpi0 = 10.77.0.2/24, host name "$NETNS_NAME-h1"; rank 1.
# Nothing else joins them: no route to the outside, no loopback shared. What the two ranks still
# share (one machine): the file system, /tmp, the process table, memory bandwidth and the 2 cores.
# Open MPI is held to the veth: --mca pml ob1 --mca btl tcp,self (no shared memory, no UCX), and
# btl_tcp_if_include / oob_tcp_if_include 10.77.0.0/24 (ranks' data and the runtime's control
# channel). Open MPI starts a remote rank's daemon (orted) through its rsh launcher, normally ssh;
# here --mca plm_rsh_agent is a small script written at run time that maps the host address to
# its namespace and runs the daemon there (`ip netns exec NS unshare --uts sh -c CMD`, the shell
# command line ssh would run).
#
# Environment:
#   NETNS_NAME         namespace name prefix (default attn2h<pid>); another script can find the
#                      ranks' processes with `ip netns pids $NETNS_NAME-1` or fail the link with
#                      `ip -n $NETNS_NAME-1 link set mpi0 down` (tools/mpi_kill_test.sh)
#   NETNS_TIMEOUT      seconds before mpirun is sent SIGTERM (then SIGKILL 10 s later); default 900
#   NETNS_RATE         emulate a slower link: a token-bucket filter (tc tbf) at this rate on both
#                      ends, e.g. 1gbit, 10gbit (tc's units); default: none (veth: memory speed);
#                      NETNS_QUEUE (50ms) and NETNS_BURST (1mb): the tbf's latency and burst.
#                      Not a faithful network: Open MPI's all-reduce gets about half the rate
#                      through it (docs/distributed-scaling.md); no netem here for a latency
#   NETNS_MPIRUN_ARGS  more mpirun arguments (split on spaces), e.g. "--tag-output"
#   NETNS_KEEPALIVE    "TIME INTERVAL PROBES" (default "5 2 3"; "off": Open MPI's 300 20 9): TCP
#                      keepalive on the runtime's control channel, so mpirun notices a failed link
#                      to h1's daemon within TIME + INTERVAL x PROBES s of silence ("ORTE has lost
#                      communication with a remote daemon") and ends the job; without it a
#                      partition leaves mpirun waiting for minutes. It only helps while no rank
#                      has aborted yet: once MPI_Abort's message is queued to the lost daemon,
#                      Open MPI 4.1.4's mpirun waits anyway (docs/distributed-scaling.md)
# The ranks get this environment (the daemon on h1 inherits it through the launcher), run in the
# current directory, and their stdout/stderr come through mpirun's (stdin: /dev/null).
# After the job it prints to stderr the bytes each end of the veth sent and received:
#   netns_2host: veth bytes: h0 sent N received N; h1 sent N received N
# (all TCP traffic between the hosts, the runtime's included; tools/netns_equality.sh and
# docs/distributed-scaling.md use it for bytes per training step).
# Exit status: the command's (mpirun's); 124 when NETNS_TIMEOUT ran out; 77 when the two hosts
# cannot be made here (not root, no iproute2 or Open MPI, `ip netns add` refused), after a line
#   netns_2host: skipped: REASON
# (the exact error of the command that failed). It always removes the namespaces it made (and
# kills what still runs in them) on exit, also on Ctrl-C and SIGTERM.

PROG=netns_2host
NAME=${NETNS_NAME:-attn2h$$}
NS0=$NAME-0
NS1=$NAME-1
IP0=10.77.0.1
IP1=10.77.0.2
NET=10.77.0.0/24
TIMEOUT=${NETNS_TIMEOUT:-900}

skip() {
  echo "$PROG: skipped: $*" >&2
  exit 77
}

selftest=0
if [ "${1:-}" = --selftest ]; then
  selftest=1
  BUILD=${2:-build}
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  CHECK="$ROOT/$BUILD/tools/mpi_check"
  [ -x "$CHECK" ] || { echo "$PROG: error: $CHECK missing: make BUILD=$BUILD mpi-check" >&2; exit 1; }
  set -- "$CHECK"
fi
if [ $# -eq 0 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
  [ $# -eq 0 ] && exit 2
  exit 0
fi

command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"
command -v mpirun >/dev/null 2>&1 || skip "no mpirun (apt-get install openmpi-bin libopenmpi-dev)"
command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux)"
[ "$(id -u)" -eq 0 ] || skip "needs root for ip netns (running as uid $(id -u))"
if [ -n "${NETNS_RATE:-}" ]; then
  command -v tc >/dev/null 2>&1 || skip "NETNS_RATE set but no tc command (iproute2)"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/$PROG.XXXXXX") || exit 1
made=""

# Kill what still runs in our namespaces (by pid: only processes inside them), then remove them.
cleanup() {
  for ns in $made; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  done
  for ns in $made; do
    ip netns del "$ns" 2>/dev/null || echo "$PROG: warning: could not delete namespace $ns" >&2
  done
  made=""
  rm -rf "$dir"
}
trap 'cleanup' EXIT
job=""
# A signal: stop the job (timeout passes SIGTERM on to mpirun), then the EXIT trap cleans up.
on_signal() {
  [ -n "$job" ] && kill -TERM "$job" 2>/dev/null
  exit "$1"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

# Make the namespaces; the first failure is the reason to skip, word for word.
try() {
  if ! out=$("$@" 2>&1); then
    skip "'$*' failed: ${out:-exit status $?}"
  fi
}
try ip netns add "$NS0"
made="$NS0"
try ip netns add "$NS1"
made="$NS0 $NS1"
try ip link add mpi0 netns "$NS0" type veth peer name mpi0 netns "$NS1"
try ip -n "$NS0" addr add "$IP0/24" dev mpi0
try ip -n "$NS1" addr add "$IP1/24" dev mpi0
for ns in "$NS0" "$NS1"; do
  try ip -n "$ns" link set lo up
  try ip -n "$ns" link set mpi0 up
  if [ -n "${NETNS_RATE:-}" ]; then
    # burst: at least rate/HZ; 1 MiB covers 10gbit at HZ 250 with room
    try ip netns exec "$ns" tc qdisc add dev mpi0 root tbf rate "$NETNS_RATE" burst "${NETNS_BURST:-1mb}" latency "${NETNS_QUEUE:-50ms}"
  fi
done
try ip netns exec "$NS0" unshare --uts true

# The launcher Open MPI calls instead of ssh: AGENT [options] HOST COMMAND...
agent="$dir/agent.sh"
cat > "$agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case \$host in
  $IP0) ns=$NS0 h=$NAME-h0 ;;
  $IP1) ns=$NS1 h=$NAME-h1 ;;
  *) echo "$PROG agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$h" "\$*"
EOF
chmod +x "$agent"

root_arg=""
[ "$(id -u)" -eq 0 ] && root_arg=--allow-run-as-root
keepalive=""
ka=${NETNS_KEEPALIVE:-5 2 3}
if [ "$ka" != off ]; then
  # shellcheck disable=SC2086 # three numbers
  [ "$(echo $ka | wc -w)" -eq 3 ] || { echo "$PROG: error: NETNS_KEEPALIVE=\"$ka\": TIME INTERVAL PROBES, or off" >&2; exit 2; }
  # shellcheck disable=SC2086 # three numbers
  set -- $ka -- "$@"
  keepalive="--mca oob_tcp_keepalive_time $1 --mca oob_tcp_keepalive_intvl $2 --mca oob_tcp_keepalive_probes $3"
  shift 4
fi
# In the background, so that a signal to this script is handled at once (wait returns).
# shellcheck disable=SC2086 # NETNS_MPIRUN_ARGS: split on spaces on purpose
timeout -k 10 "$TIMEOUT" ip netns exec "$NS0" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$NAME-h0" \
  mpirun $root_arg -np 2 --host "$IP0:1,$IP1:1" --bind-to none \
  --mca plm_rsh_agent "$agent" \
  --mca pml ob1 --mca btl tcp,self \
  --mca btl_tcp_if_include "$NET" --mca oob_tcp_if_include "$NET" $keepalive \
  ${NETNS_MPIRUN_ARGS:-} "$@" &
job=$!
wait "$job"
rc=$?
job=""
[ $rc -eq 124 ] && echo "$PROG: timed out after $TIMEOUT s (NETNS_TIMEOUT)" >&2

tx0=$(ip netns exec "$NS0" cat /sys/class/net/mpi0/statistics/tx_bytes 2>/dev/null)
rx0=$(ip netns exec "$NS0" cat /sys/class/net/mpi0/statistics/rx_bytes 2>/dev/null)
tx1=$(ip netns exec "$NS1" cat /sys/class/net/mpi0/statistics/tx_bytes 2>/dev/null)
rx1=$(ip netns exec "$NS1" cat /sys/class/net/mpi0/statistics/rx_bytes 2>/dev/null)
echo "$PROG: veth bytes: h0 sent ${tx0:-?} received ${rx0:-?}; h1 sent ${tx1:-?} received ${rx1:-?}" >&2

if [ $selftest -eq 1 ] && [ $rc -eq 0 ]; then
  # the 16 MiB all-reduce alone moves >= 16 MiB each way between 2 ranks (ring: 2(n-1)/n = 1x)
  min=$((16 * 1024 * 1024))
  if [ "${tx0:-0}" -lt $min ] || [ "${tx1:-0}" -lt $min ]; then
    echo "$PROG: selftest FAILED: under $min bytes crossed the veth: the ranks talked another way" >&2
    rc=1
  else
    echo "$PROG: selftest ok: 2 ranks in 2 namespaces, all-reduce checked, traffic over the veth" >&2
  fi
fi
exit $rc

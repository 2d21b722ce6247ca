#!/bin/sh
# mpi_kill_test.sh — issue 19's failure check: a 2-rank `attn train --arch gpt` loses a rank (or
# its network) mid-run; the job must end (no hang), the surviving side must print one error line
# naming a rank, and the last checkpoint (written by rank 0) must load and continue.
#
#   sh tools/mpi_kill_test.sh [BUILD] [MODE...]      (make mpi-kill-test; default modes: all)
# Modes:
#   local   mpirun -np 2 on this machine (shared memory); rank 1's attn is sent SIGKILL
#   netns   the two "hosts" of tools/netns_2host.sh (namespaces + veth, TCP); rank 1's attn is
#           sent SIGKILL on h1
#   link    the two hosts; h1's end of the veth is taken down (a network that fails: nothing
#           dies, so only attn's own collective timeout, --comm-timeout, can end the job)
# Each run: the training (the default shakespeare-char model, 1 thread per rank, a checkpoint
# every SAVE_EVERY steps) starts; once a checkpoint exists and the run is a few steps past it,
# the failure is made; then, with DEADLINE seconds at most (timeout(1) around mpirun):
#   1. the job ends (mpirun exits before DEADLINE), with a non-zero status; the time from the
#      failure to the end of the last attn rank and to mpirun's end are both reported (link:
#      once a rank has called MPI_Abort, Open MPI 4.1.4's mpirun waits for its daemon on h1,
#      which it cannot reach, though every rank has ended; only the TCP keepalive that
#      tools/netns_2host.sh turns on, when it notices the lost daemon before a rank aborts, ends
#      the job; the mode then fails and says which happened)
#   2. a line "attn: error: rank R of 2: ..." (attn's one-line error: the surviving rank's; in link
#      mode it must be that one), or,
#      where Open MPI's runtime ended the survivor before it could print (local, netns: mpirun
#      sees a rank die and stops the job at once), mpirun's own line naming the rank that died
#      ("... process rank 1 ... exited on signal 9"); which one was seen is reported
#   3. the checkpoint directory's training_state.json has a step S >= 1, and a single-process
#      `attn train --arch gpt --out DIR --resume --max-steps S+1` continues it to step S+1
#   4. nothing of the job is left (local: the ranks' processes are gone; netns/link: the
#      namespaces are removed)
# Output: one line per mode "mpi_kill_test: MODE: ok|FAILED|skipped: ..." plus the job's log
# when it failed. Exit status 1 when a mode failed, 77 when every mode was skipped (no MPI in
# attn, no namespaces), else 0.
# Environment: COMM_TIMEOUT (attn's --comm-timeout, 10 s; link mode: LINK_COMM_TIMEOUT, 4 s,
# and --comm-abort-delay LINK_ABORT_DELAY, 30 s), DEADLINE (60 s), SAVE_EVERY (5),
# KEEP=1 keeps the work directory (printed), ATTN=PATH another attn binary than BUILD/attn.
BUILD=${1:-build}; [ $# -gt 0 ] && shift
MODES=${*:-local netns link}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
ATTN=${ATTN:-$ROOT/$BUILD/attn}
DATA="$ROOT/../shared/data/tinyshakespeare/input.txt"
CT=${COMM_TIMEOUT:-10}
DEADLINE=${DEADLINE:-60}
SAVE_EVERY=${SAVE_EVERY:-5}
PROG=mpi_kill_test
root_arg=""
[ "$(id -u)" -eq 0 ] && root_arg=--allow-run-as-root

[ -x "$ATTN" ] || { echo "$PROG: error: $ATTN missing (make BUILD=$BUILD)"; exit 1; }
[ -f "$DATA" ] || { echo "$PROG: error: $DATA missing"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/$PROG.XXXXXX") || exit 1
job=""
cleanup() {
  [ -n "$job" ] && kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "$PROG: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Whether this attn was built with MPI: `attn info` says "mpi: LIBRARY ..." or "mpi: no (...)".
mpi_reason=""
info=$("$ATTN" info 2>&1 | grep '^mpi: ' | head -n 1)
if ! command -v mpirun >/dev/null 2>&1; then mpi_reason="no mpirun (apt-get install openmpi-bin)"
elif [ -z "$info" ]; then mpi_reason="$ATTN has no MPI support (no 'mpi:' line in 'attn info')"
elif [ "${info#mpi: no}" != "$info" ]; then mpi_reason="$ATTN was built without MPI ('attn info': $info)"
fi

# The value of VAR in the environment of process $1 (empty if none or gone).
env_of() { tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | sed -n "s/^$2=//p"; }

# Among the pids given, the one running attn as MPI rank 1.
rank1_of() {
  for p in "$@"; do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = attn ] || continue
    [ "$(env_of "$p" OMPI_COMM_WORLD_RANK)" = 1 ] && { echo "$p"; return; }
  done
}

# The attn processes of the running job (local: mpirun's children; netns/link: in the namespaces).
attn_pids() {
  if [ "$mode" = local ]; then ps=$(pgrep -P "${mpirun_pid:-0}" 2>/dev/null)
  else ps="$(ip netns pids "$name-0" 2>/dev/null) $(ip netns pids "$name-1" 2>/dev/null)"
  fi
  for p in $ps; do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = attn ] && echo "$p"; done
}

# The step of the checkpoint in $1 (0 when none yet).
ckpt_step() {
  s=$(sed -n 's/^  "step": \([0-9]*\),*$/\1/p' "$1/training_state.json" 2>/dev/null | head -n 1)
  echo "${s:-0}"
}

# The last "step N/M" progress line's N in log $1.
log_step() {
  s=$(sed -n 's/^step *\([0-9]*\)\/.*/\1/p' "$1" 2>/dev/null | tail -n 1)
  echo "${s:-0}"
}

failed=0 ran=0
for mode in $MODES; do
  case $mode in local | netns | link) ;; *) echo "$PROG: error: unknown mode $mode"; exit 2 ;; esac
  if [ -n "$mpi_reason" ]; then
    echo "$PROG: $mode: skipped: $mpi_reason"
    continue
  fi
  out="$work/$mode.ckpt" log="$work/$mode.log"
  name="attnkill$$$mode"
  # link: attn's timeout well inside the harness's keepalive window (5 s idle + 3 probes 2 s
  # apart), so attn's line comes first, then a wait past that window before MPI_Abort, so that
  # Open MPI's keepalive, not MPI_Abort, ends mpirun (after MPI_Abort Open MPI 4.1's mpirun waits
  # for the unreachable daemon; docs/training.md)
  ct=$CT delay=0
  [ "$mode" = link ] && ct=${LINK_COMM_TIMEOUT:-4} delay=${LINK_ABORT_DELAY:-30}
  set -- "$ATTN" train --arch gpt --data "$DATA" --out "$out" --max-steps 100000 \
    --save-every "$SAVE_EVERY" --log-every 1 --eval-every 1000000 --eval-iters 1 \
    --comm-timeout "$ct" --comm-abort-delay "$delay"
  t0=$(date +%s)
  if [ "$mode" = local ]; then
    OMP_NUM_THREADS=1 timeout -k 5 "$DEADLINE" mpirun $root_arg -np 2 --bind-to none "$@" > "$log" 2>&1 &
  else
    NETNS_NAME=$name NETNS_TIMEOUT=$DEADLINE OMP_NUM_THREADS=1 sh tools/netns_2host.sh "$@" > "$log" 2>&1 &
  fi
  job=$!
  # until a checkpoint exists and the run is 3 steps past it (at most 90 s)
  ready=0
  while [ $(( $(date +%s) - t0 )) -lt 90 ] && kill -0 "$job" 2>/dev/null; do
    s=$(ckpt_step "$out")
    if [ "$s" -ge 1 ] && [ "$(log_step "$log")" -ge $((s + 3)) ]; then ready=1; break; fi
    sleep 0.5
  done
  if [ $ready -eq 0 ]; then
    if grep -q 'netns_2host: skipped' "$log"; then
      echo "$PROG: $mode: skipped: $(sed -n 's/^netns_2host: skipped: //p' "$log")"
      wait "$job" 2>/dev/null; job=""
      continue
    fi
    echo "$PROG: $mode: FAILED: the training did not reach a checkpoint and 3 more steps in 90 s"
    sed 's/^/  | /' "$log" | tail -n 30
    failed=1; kill -TERM "$job" 2>/dev/null; wait "$job" 2>/dev/null; job=""
    continue
  fi
  ran=1
  # the failure
  if [ "$mode" = local ]; then
    mpirun_pid=$(pgrep -P "$job" | head -n 1)
    victim=$(rank1_of $(pgrep -P "$mpirun_pid"))
  else
    # shellcheck disable=SC2046 # the pids, one word each
    victim=$(rank1_of $(ip netns pids "$name-1" 2>/dev/null))
  fi
  at_step=$(log_step "$log")
  if [ "$mode" = link ]; then
    what="h1's veth taken down at step $at_step"
    ip -n "$name-1" link set mpi0 down || { echo "$PROG: $mode: FAILED: ip link set down"; failed=1; }
  else
    what="rank 1 (pid ${victim:-?}) killed at step $at_step"
    if [ -z "$victim" ]; then
      echo "$PROG: $mode: FAILED: cannot find rank 1's attn process"
      failed=1; kill -TERM "$job" 2>/dev/null; wait "$job" 2>/dev/null; job=""
      continue
    fi
    kill -9 "$victim"
  fi
  tk=$(date +%s)
  # while the job runs: when did the last attn rank end (mpirun may outlive its ranks)?
  ranks_end=""
  while kill -0 "$job" 2>/dev/null; do
    if [ -z "$ranks_end" ] && [ -z "$(attn_pids)" ]; then ranks_end=$(( $(date +%s) - tk )); fi
    sleep 0.5
  done
  wait "$job"
  rc=$?
  job=""
  dt=$(( $(date +%s) - tk ))
  [ -z "$ranks_end" ] && ranks_end=$dt
  why=""
  # 1. the job ended by itself, with an error status
  # (timeout(1) gives 124, or 137 after its SIGKILL; mpirun also gives 137 for a rank killed by
  # signal 9: the clock tells them apart)
  if [ $(( $(date +%s) - t0 )) -ge "$DEADLINE" ] && { [ $rc -eq 124 ] || [ $rc -eq 137 ]; }; then
    if [ "$ranks_end" -lt "$dt" ]; then
      why="$why; every attn rank ended ${ranks_end} s after the failure, but mpirun did not return until the $DEADLINE s deadline killed it (Open MPI 4.1's runtime waits for the daemon it cannot reach; docs/distributed-scaling.md)"
    else
      why="$why; the job did not end: killed by the $DEADLINE s deadline"
    fi
  elif [ $rc -eq 0 ]; then why="$why; mpirun exited with status 0 after the failure"
  fi
  # 2. the one-line error naming a rank
  err=$(grep -E '^attn: error: rank [0-9]+ of 2: ' "$log" | head -n 1)
  mpierr=$(grep -E 'rank 1 .*(exited on signal|killed|Killed)|process rank 1' "$log" | head -n 1)
  if [ -n "$err" ]; then said="attn: \"$err\""
  elif [ "$mode" != link ] && [ -n "$mpierr" ]; then said="mpirun (the survivor was stopped by Open MPI): \"$mpierr\""
  else said=""; why="$why; no error line naming a rank"
  fi
  # 3. the checkpoint loads and continues
  s=$(ckpt_step "$out")
  if [ "$s" -lt 1 ]; then why="$why; no checkpoint in $out"
  else
    if OMP_NUM_THREADS=1 "$ATTN" train --arch gpt --out "$out" --resume --max-steps $((s + 1)) \
         > "$work/$mode.resume.log" 2>&1 && grep -q "^done: step $((s + 1))," "$work/$mode.resume.log"; then :
    else
      why="$why; --resume of the step-$s checkpoint failed: $(tail -n 1 "$work/$mode.resume.log")"
    fi
  fi
  # 4. nothing left
  if [ "$mode" = local ]; then
    [ -n "$victim" ] && kill -0 "$victim" 2>/dev/null && why="$why; rank 1 still runs"
    left=$(pgrep -P "${mpirun_pid:-0}" 2>/dev/null)
    [ -n "$left" ] && why="$why; processes of the job left: $left"
  else
    ip netns list 2>/dev/null | grep -q "^$name-" && why="$why; namespaces $name-* left"
  fi
  if [ -n "$why" ]; then
    echo "$PROG: $mode: FAILED: $what; exit status $rc after $dt s${why}"
    sed 's/^/  | /' "$log" | tail -n 40
    failed=1
  else
    echo "$PROG: $mode: ok: $what; the ranks ended $ranks_end s and mpirun $dt s later (status $rc); error from $said; checkpoint step $s resumed to step $((s + 1))"
  fi
done
[ $failed -eq 1 ] && exit 1
[ $ran -eq 0 ] && exit 77
exit 0
